"""The Merkx & Frank 2019 records: the character-level GRU with attention, and its CPU-size
variant at half the recurrent width."""

from __future__ import annotations

from grounded_text.papers.record import Preset, variant

CHAR_GRU_ATTENTION = Preset(
    name="char_gru_attention", builder="char_gru_attention",
    paper="Merkx & Frank 2019, Learning semantic sentence representations from visually grounded "
          "language without lexical knowledge (NLE)",
    config={
        "data": {"one_caption_per_image": False, "batch_size": 32, "sampler": "random",
                 "bucket_by_length": True},
        "text": {"lowercase": False, "sentence_end": "space_period"},
        "model": {"embedding_dim": 2048, "loss": "triplet",
                  "loss_params": {"margin": 0.2, "direction_weight": 1.0, "negatives": "all"},
                  "encoder": {"char_dim": 20, "units": 1024, "num_layers": 1, "cell": "gru",
                              "bidirectional": True, "pooling": "attention", "attention_units": 128,
                              "max_chars": None, "attention_heads": 1, "attention_include_padding": False,
                              "attention_diversity_margin": None, "char_embedding_init": "normal",
                              "weight_init": "keras", "char_ids": "vocabulary"}},
        "train": {"epochs": 32, "learning_rate": 1e-3, "lr_min": 1e-6, "schedule": "cyclic_cosine",
                  "cycle_epochs": 4, "snapshots": True, "ensemble_size": 2, "select_on": "dev_retrieval",
                  "clip_norm_text": 0.05 * 32**2, "clip_norm_image": 0.0025 * 32**2},
    },
    sources={
        "text.lowercase": "§3.2.1: characters kept as they are (case and punctuation)",
        "model.embedding_dim": "§3.3: the embedding is 2n; §4.1: the GRU 2048 is chosen (n = 1024)",
        "model.loss": "§3.1.2: hinge loss between captions and images",
        "model.loss_params.margin": "§3.3: margin α = 0.2",
        "model.loss_params.direction_weight": "§3.1.2: both directions summed with equal weight",
        "model.loss_params.negatives": "§3.1.2: summed over all in-batch counterexamples",
        "model.encoder.char_dim": "§3.3: 20-d character embeddings",
        "model.encoder.units": "§3.3 tests n in {512, 1024, 2048} per direction; §4.1 chooses n = 1024",
        "model.encoder.cell": "§4.1: the GRU is chosen (§3.1.2 tests GRU and LSTM)",
        "model.encoder.bidirectional": "§3.1.2 and §3.3: a single-layer bidirectional RNN",
        "model.encoder.num_layers": "§3.3: a single-layer bidirectional RNN",
        "model.encoder.pooling": "§3.1.2: vector self-attention over the GRU states",
        "model.encoder.attention_units": "§3.3: the attention layer has 128 hidden units",
        "model.encoder.attention_heads": "§3.1.2: one self-attention layer, a 2n-dimensional sentence vector "
                                         "(the authors' code trains 2 heads, flickr_char/char_net.py:50 at "
                                         "caption2image 8a4dc2c)",
        "train.learning_rate": "§3.3: cyclic learning rate, maximum 1e-3 (Adam)",
        "train.lr_min": "§3.3: cyclic learning rate, minimum 1e-6",
        "train.schedule": "§3.3: cyclic cosine learning rate, min → max → min each cycle",
        "train.cycle_epochs": "§3.3: cycles of 4 epochs",
        "train.epochs": "§3.3: 32 epochs (8 cycles)",
        "train.snapshots": "§3.3: a snapshot at every fourth epoch (the end of each cycle)",
        "train.ensemble_size": "§3.3: the ensemble of the 2 best snapshots",
        "train.select_on": "§3.3: tuning and snapshot choice on the development set's image-caption "
                           "retrieval",
    },
    unsaid={
        "data.batch_size": "the paper never gives its minibatch size; ours: 32",
        "data.one_caption_per_image": "not stated (§3.2.1: five captions per image); ours: all five",
        "data.sampler": "ours: shuffled pairs",
        "data.bucket_by_length": "our speed choice: batches of captions of similar length (less padding)",
        "model.encoder.max_chars": "ours: no truncation",
        "model.encoder.attention_include_padding": "ours: the softmax over the caption's characters only "
                                                   "(the authors' code: over the zero-padded batch, "
                                                   "costum_layers.py:95,98 at caption2image 8a4dc2c)",
        "model.encoder.attention_diversity_margin": "ours: none, one head (the authors' code adds its "
                                                    "attention_loss with 2 heads, costum_loss.py:72-94)",
        "model.encoder.char_embedding_init": "not stated; the authors' code draws the character embeddings "
                                             "from N(0, 1), nn.Embedding's default (caption2image 8a4dc2c, "
                                             "encoders.py:21-23), and so do we (Keras' default U(-0.05, 0.05) "
                                             "learnt far more slowly: the caption gap's char_init_normal arm)",
        "model.encoder.char_ids": "not stated; ours: the training captions' characters, one shared row for "
                                  "any other (the authors' code: string.printable's 100, '0' and unknown "
                                  "characters on the zero padding row, caption2image 8a4dc2c, "
                                  "prep_text.py:21-35; the caption gap's clip+char_ids_printable arm)",
        "model.encoder.weight_init": "not stated; ours: Keras' initialisers for the GRU (Glorot input, "
                                     "orthogonal recurrent kernels, zero biases), the attention and the image "
                                     "bias; the authors' code leaves PyTorch's defaults (nn.GRU's U(±1/√n), an "
                                     "orthogonal attention W: caption2image 8a4dc2c, encoders.py:24-26, "
                                     "costum_layers.py:91-94), which the caption gap's torch_init arm measures",
        "train.clip_norm_text": "not stated; the authors' code clips each tower's gradient norm, the caption "
                                "tower's at 0.05 (caption2image 8a4dc2c, flickr_char/char_net.py:124-125, "
                                "functions/trainer.py:123-125) on its hinge averaged over the B x B matrix "
                                "(costum_loss.py:39); ours is summed, B^2 = 1,024 times larger at B = 32, so "
                                "0.05 x 1,024 = 51.2 clips where theirs does, and so do we: at n = 512, one "
                                "cycle, it raised MSRvid by 0.032 and caption-image R@10 by 3.9 (both p < "
                                "0.001; the caption gap's clip_per_tower arm on top of the record)",
        "train.clip_norm_image": "not stated; the authors' code clips the image tower's gradient norm at "
                                 "0.0025 (caption2image 8a4dc2c, flickr_char/char_net.py:43,125); ours: "
                                 "0.0025 x B^2 = 2.56 on our summed hinge (see clip_norm_text)",
        "text.sentence_end": "not stated; the authors' code appends ' .' to every training caption that "
                             "does not end in '.' (caption2image 8a4dc2c, preprocessing/text_features.py:"
                             "28-29), and so do we: at n = 512, one cycle, it raised SICK-R by 0.011 "
                             "(Williams' test p < 0.001) and moved nothing else beyond chance (the caption "
                             "gap's sentence_end_train arm)",
    },
    notes="Image branch: a linear map of the CNN features to the text width, L2-normalised (§3.1.1). "
          "The exported text tower is the snapshot ensemble.",
)

CHAR_GRU_ATTENTION_512 = variant(
    CHAR_GRU_ATTENTION, "char_gru_attention_512",
    {"model": {"embedding_dim": 1024, "encoder": {"units": 512}}},
    {"model.embedding_dim": "CPU-size variant: 2 x 512 = 1024-d sentence vectors",
     "model.encoder.units": "CPU-size variant: 512 units per direction, one of the sizes §3.3 tests (the "
                            "chosen model has 1024, §4.1)"},
    notes="The paper's configuration at half the recurrent width, for CPU runs; everything else as "
          "char_gru_attention.",
)
