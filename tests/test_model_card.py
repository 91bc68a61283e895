"""The model card beside an export: TF Hub metadata and the Kaggle-style sections."""

from grounded_text.serving.model_card import MODEL_CARD, write_model_card


def test_the_card_has_metadata_use_limitations_data_terms_and_figures(tmp_path):
    config = {"model": {"name": "vete_bow"}, "data": {"features": "efficientnet_lite0", "one_caption_per_image": True}}
    path = write_model_card(tmp_path, config, {"STS-B test pearson": 0.58, "SICK test pearson": None},
                            embedding_dim=128, parameters=1234)
    card = path.read_text()
    assert path == tmp_path / MODEL_CARD
    for line in ("<!-- module-type: text-embedding -->", "<!-- language: en -->", "<!-- dataset: flickr8k -->",
                 "<!-- network-architecture: vete_bow (grounded_text), N=128 -->"):
        assert line in card
    sections = [line for line in card.splitlines() if line.startswith("## ")]
    assert sections == ["## Overview", "## Intended use", "## Limitations", "## Training data", "## Usage",
                        "## Evaluation (cosine similarity, unsupervised; Pearson r)", "## Training config"]
    assert "Kurach et al. 2017" in card  # the preset's paper
    assert "English only" in card and "weak on questions, definitions" in card
    assert "Flickr8k (Hodosh, Young & Hockenmaier 2013" in card and "research use" in card
    assert "| STS-B test pearson | 0.5800 |" in card and "| SICK test pearson | n/a |" in card
    assert "one caption per image" in card and "float32 [batch, 128]" in card


def test_an_unknown_dataset_points_to_its_own_terms(tmp_path):
    card = write_model_card(tmp_path, {"model": {"name": "mine"}, "data": {"dataset": "/data/my_pairs"}}).read_text()
    assert "<!-- dataset: my_pairs -->" in card and "`my_pairs`: see that dataset's own terms of use." in card
    assert "Configuration from" not in card and "| not evaluated | — |" in card
