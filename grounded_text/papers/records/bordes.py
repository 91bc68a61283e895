"""The Bordes et al. 2019 records: the grounded space of §3 (``bordes_cg_pg``) and the same
grounding applied to a pretrained sentence encoder (``grounded_pretrained``)."""

from __future__ import annotations

from grounded_text.papers.record import Preset

CG_PG = Preset(
    name="bordes_cg_pg", builder="bordes_cg_pg",
    paper="Bordes et al. 2019, Incorporating Visual Semantics into Sentence Representations within "
          "a Grounded Space (EMNLP)",
    config={
        "data": {"one_caption_per_image": False, "batch_size": 128, "sampler": "grouped",
                 "captions_per_image": 2},
        "text": {"lowercase": True},
        "model": {"embedding_dim": 128, "loss": "grounding",
                  "loss_params": {"alpha_cluster": 0.01, "alpha_perceptual": 0.01, "margin": 0.5},
                  "encoder": {"word_dim": 128, "units": None, "num_layers": 1, "cell": "gru",
                              "pooling": "last", "bidirectional": False, "dropout": 0.0,
                              "trainable_embeddings": True, "projection": "mlp", "grounded_hidden": 512,
                              "grounded_dim": 512, "export_space": "grounded"}},
        "train": {"epochs": 20, "learning_rate": 8e-4, "select_on": "sick_val", "schedule": "constant",
                  "snapshots": False},
    },
    sources={
        "model.loss": "§3.2, eq. 4: the C_g + P_g model trains α_C L_C + α_P L_P (eqs. 2-3)",
        "data.sampler": "§3.2, eq. 2: L_C needs visually equivalent sentences (captions of one image) "
                        "in the batch",
        "data.one_caption_per_image": "§3.2: L_C needs several captions per image",
        "model.encoder.cell": "§4.4: the sentence encoder F_t is a GRU (SkipThought's, Kiros et al. 2015)",
        "model.encoder.pooling": "§3.1: s = F_t(S), SkipThought's GRU (§4.4), whose sentence vector is its "
                                 "final state",
        "model.encoder.export_space": "Table 1: the grounding-only models (no textual loss) are measured "
                                      "in the grounded space g(u), where the grounding losses act",
        "model.loss_params.margin": "§4.4: γ = γ' = 0.5",
        "model.loss_params.alpha_cluster": "§4.4: α_C = α_P = 0.01 (tuned on SICK validation Pearson r)",
        "model.loss_params.alpha_perceptual": "§4.4: α_C = α_P = 0.01",
        "model.encoder.projection": "§4.4: f and g are 2-layer MLPs",
        "model.encoder.grounded_dim": "§4.4: d_g = 512",
        "train.learning_rate": "§4.4: Adam with l_r = 8e-4",
        "train.select_on": "§4.4: hyperparameters tuned on the Pearson correlation on the SICK validation "
                           "set; ours: cosine Pearson r on SICK trial (its validation split) each epoch, the "
                           "best epoch exported",
    },
    unsaid={
        "data.batch_size": "not stated in the paper; ours: 128 (64 images x 2 captions)",
        "data.captions_per_image": "ours: 2 captions per image per batch (the fewest L_C needs)",
        "text.lowercase": "not stated; ours: lowercase words",
        "model.embedding_dim": "§4.2 and §4.4 state d_t = 2048 (SkipThought); ours: N = 128, the zoo's width "
                               "for a GRU trained from scratch on Flickr8k",
        "model.encoder.word_dim": "§4.4 states 620-d word embeddings (SkipThought's); ours: 128-d, learnt "
                                  "from scratch",
        "model.encoder.units": "§4.4 states d_t = 2048; ours: None = N (128)",
        "model.encoder.num_layers": "not stated (SkipThought's GRU has one layer); ours: one layer",
        "model.encoder.bidirectional": "not stated; ours: one direction",
        "model.encoder.dropout": "not stated; ours: none",
        "model.encoder.trainable_embeddings": "ours: learnt from scratch (the paper starts from SkipThought "
                                              "trained on BookCorpus, §4.1-4.2)",
        "model.encoder.grounded_hidden": "§4.4 gives d_g = 512 but not the MLP's hidden width; ours: 512",
        "train.epochs": "not stated; ours: 20",
        "train.schedule": "not stated; ours: constant",
        "train.snapshots": "no snapshot ensembling in the paper",
    },
    notes="No SkipThought textual loss L_T (the paper's, on BookCorpus): this preset trains the "
          "grounding objective alone, as the paper's Table 1 models do (§5.1). α_C, α_P and l_r are §4.4's, "
          "tuned there next to L_T; trained alone, the factor 0.01 scales L_G's gradients, which Adam's "
          "step mostly normalises away. The exported text tower is g(u), the grounded space (export_space; "
          "'textual' exports u = F_t(s)).",
)

GROUNDED_PRETRAINED = Preset(
    name="grounded_pretrained", builder="grounded_pretrained",
    paper="Bordes et al. 2019 §3 (grounding a pretrained sentence encoder; here a keras-hub transformer)",
    config={
        "data": {"one_caption_per_image": False, "batch_size": 128, "sampler": "grouped",
                 "captions_per_image": 2},
        "text": {"lowercase": True},
        "model": {"loss": "grounding",
                  "loss_params": {"alpha_cluster": 1.0, "alpha_perceptual": 1.0, "margin": 0.5},
                  "encoder": {"preset": None, "sequence_length": 64, "trainable_backbone": True,
                              "projection": "mlp", "grounded_hidden": 512, "grounded_dim": 512,
                              "anchor_weight": 0.0}},
        "train": {"epochs": 20, "learning_rate": 1e-3, "select_on": "avg2016", "schedule": "constant",
                  "snapshots": False},
    },
    sources={
        "model.loss": "§3.2, eq. 4: α_C L_C + α_P L_P",
        "data.sampler": "§3.2, eq. 2: L_C needs captions of one image in the batch",
        "data.one_caption_per_image": "§3.2: L_C needs several captions per image",
        "model.loss_params.margin": "§4.4: γ = 0.5",
        "model.encoder.projection": "§4.4: g is a 2-layer MLP",
        "model.encoder.grounded_dim": "§4.4: d_g = 512",
    },
    unsaid={
        "data.batch_size": "not stated in the paper; ours: 128 (64 images x 2 captions)",
        "data.captions_per_image": "ours: 2",
        "text.lowercase": "the pretrained tower's own tokenizer decides; this only shapes the unused "
                          "word vocabulary",
        "model.loss_params.alpha_cluster": "§4.4 states α_C = α_P = 0.01 next to L_T; ours: 1 each (L_G "
                                           "alone: a common factor only rescales the loss)",
        "model.loss_params.alpha_perceptual": "§4.4 states α_C = α_P = 0.01; ours: 1 each (see alpha_cluster)",
        "model.encoder.preset": "required from the user: a local keras-hub or Hugging Face-format "
                                "model folder (--encoder-param preset=DIR)",
        "model.encoder.sequence_length": "ours: 64 tokens (captions are short)",
        "model.encoder.trainable_backbone": "ours: fine-tune the backbone",
        "model.encoder.grounded_hidden": "§4.4 gives d_g = 512 but not the MLP's hidden width; ours: 512",
        "model.encoder.anchor_weight": "beyond the paper; off by default",
        "train.epochs": "not stated; ours: 20",
        "train.learning_rate": "§4.4 states Adam with l_r = 8e-4; ours: Adam 1e-3 (not re-tuned)",
        "train.select_on": "§4.4 tunes on the SICK validation Pearson r; ours: avg2016",
        "train.schedule": "ours: constant",
        "train.snapshots": "ours: none",
    },
    notes="The text width is the backbone's (ModelConfig.embedding_dim is not used).",
)
