"""The four papers' published figures, as data: one ``PaperFigure`` per table cell.

Transcribed from the papers' tables (the Markdown copies the project keeps beside its data):

* Kurach et al. 2017 (VETE), Tables 1–6: Pearson r on STS 2014/2015 "images", their own
  COCO-Test / Pin-Test, and averages;
* Bordes et al. 2019 (grounded space), Table 1 (structural measures and Spearman ρ × 100
  on STS / SICK) and Table 3 (SentEval accuracies);
* Merkx & Frank 2019 (char-GRU), Table 2 (Flickr8k retrieval), Table 3 (MSCOCO retrieval)
  and Table 5 (Pearson r × 100 with 95 % intervals on every STS 2012–2016 subset, STS-B and
  SICK-R);
* Kolluru (thesis), Tables 1–2 (Flickr30K and MSCOCO retrieval).

Each record keeps the cell exactly as printed (``printed``), the parsed value, the interval
half-widths where the paper prints them (``plus`` / ``minus``; a symmetric ``±`` gives the
same number twice), the scale, the training data and image features the figure was
measured with (as the paper states them), and ``ours``: the key of the figure of our
evaluation that measures the same thing on the same test set, or ``None``. Keys:
``"STS12/MSRvid"`` (``evaluate_sts`` subset Pearson/Spearman, as the paper's scale says),
``"STS14/mean"`` (a year's unweighted mean), ``"STSBenchmark/test"``,
``"STSBenchmark/test/captions"``, ``"SICK/test"``, ``"flickr8k_1k/caption_to_image/R@1"``
(``evaluate_retrieval``), ``"transfer/MR"`` (the SentEval transfer tasks). STS 2014 and
2015 are read only when their folders are present (they are the papers' held-out years).

Cells that are empty, "-" or "N/A" in the paper have no record; so do the cells the
Markdown copy lost (Bordes Table 1, row T, STS/Forum; Bordes Table 3, the MRPC F1 of the
T_1024 and SEQ rows, printed on a line of their own).
"""

from __future__ import annotations

import dataclasses
import re

PAPER_SOURCES = {
    "kurach2017_vete": "Kurach et al. 2017, Better Text Understanding Through Image-To-Text Transfer "
                       "(arXiv:1705.08386)",
    "bordes2019_grounded_space": "Bordes et al. 2019, Incorporating Visual Semantics into Sentence "
                                 "Representations within a Grounded Space (EMNLP)",
    "merkx2019_char_grounding": "Merkx & Frank 2019, Learning semantic sentence representations from "
                                "visually grounded language without lexical knowledge (NLE)",
    "kolluru_two_branch": "Kolluru (Stanford course project report), A neural architecture to learn image-text joint "
                          "embedding",
}


@dataclasses.dataclass(frozen=True)
class PaperFigure:
    """One published figure.

    Attributes:
      paper: a key of ``PAPER_SOURCES`` (also the paper's Markdown file name, without ``.md``).
      table: ``"Table 2"``.
      block: the table's sub-block (``"STS 2013"``, ``"1k results"``) or None.
      row: the row's label as printed (LaTeX and all; ``""`` where the copy lost it).
      column: the column (our wording, e.g. ``"caption→image R@1"``; ``"MRPC (F1)"`` for
        the second of two figures printed in one cell as ``acc/F1``).
      value: the figure (float, on ``scale``).
      plus, minus: the upper / lower half-width of the paper's 95 % interval, or None.
      scale: its unit (``"Pearson r"``, ``"Pearson r × 100"``, ``"R@K %"``, ...).
      training_data: what the model was trained on, as the paper says.
      image_features: the image features it was trained with (``"none"``: text only).
      ours: the key of our corresponding figure, or None (module docstring).
      printed: the cell as printed in the paper.
      note: anything else needed to read the figure.
    """

    paper: str
    table: str
    block: str | None
    row: str
    column: str
    value: float
    plus: float | None
    minus: float | None
    scale: str
    training_data: str
    image_features: str
    ours: str | None
    printed: str
    note: str = ""

    @property
    def ci95(self) -> tuple[float, float] | None:
        """``(value - minus, value + plus)`` where the paper prints an interval."""
        if self.plus is None:
            return None
        return (self.value - self.minus, self.value + self.plus)


@dataclasses.dataclass(frozen=True)
class TableSpec:
    """Where a table is in the paper's Markdown and how to read its rows.

    The rows lie between the last line containing ``begin`` (the caption or the header)
    before the first line containing ``end`` (the caption or what follows; ``""``: the end
    of the file) after a ``begin`` line;
    in a row (split on ``sep``), cell ``label_cell`` is the row label and the figures
    start at cell ``first_cell``, one per entry of ``columns``."""

    paper: str
    table: str
    begin: str
    end: str
    sep: str
    label_cell: int
    first_cell: int
    columns: tuple
    scale: object  # str, or dict column -> str
    training_data: object  # str, or dict row label / column -> str (key "*": the default)
    image_features: object
    ours: dict  # column -> key, or (block, row) -> key
    note: str = ""


# ----------------------------------------------------------------------------- the tables, as printed
_VETE1 = (
    (None, 'Word2Vec', ('0.466', '0.441', '0.379', '0.383', '0.343', '0.367')),
    (None, 'PureTextRnn', ('0.662', '0.692', '0.705', '0.484', '0.517', '0.568')),
    (None, 'PinModelA', ('0.671', '0.683', '0.709', '0.536', '0.493', '0.573')),
    (None, 'VETE-RNN', ('0.838', '0.835', '0.901', '0.549', '0.538', '0.587')),
    (None, 'VETE-CNN', ('0.808', '0.773', '0.911', '0.528', '0.435', '0.486')),
    (None, 'VETE-BOW', ('0.861', '0.855', '0.894', '0.579', '0.579', '0.622')),
)
_VETE2 = (
    (None, 'Glove (R)', ('0.624', '0.686', '0.668', '0.422')),
    (None, 'Glove (NR)', ('0.625', '0.688', '0.667', '0.471')),
    (None, 'PinModelA', ('0.671', '0.683', '0.708', '0.536')),
    (None, 'M-Skip-Gram (R)', ('0.764', '0.767', '0.784', '0.608')),
    (None, 'M-Skip-Gram (NR)', ('0.765', '0.767', '0.784', '0.654')),
    (None, 'PP-XXL (R)', ('0.802', '0.831', '0.770', '0.609')),
    (None, 'PP-XXL (NR)', ('0.804', '0.833', '0.770', '0.638')),
    (None, 'Best SemEval', ('0.834', '0.871', 'N/A', 'N/A')),
    (None, 'VETE-BOW (our)', ('0.861', '0.855', '0.894', '0.579')),
)
_VETE3 = (
    (None, 'RNN-GRU', ('0.834', '0.821', '0.906', '0.507')),
    (None, 'RNN-LSTM', ('0.838', '0.835', '0.901', '0.549')),
    (None, 'BOW-SUM', ('0.860', '0.853', '0.898', '0.573')),
    (None, 'BOW-MEAN', ('0.861', '0.855', '0.894', '0.579')),
)
_VETE4 = (
    (None, 'Covariance', ('0.594',)),
    (None, 'SKT <sub>.2</sub>', ('0.616',)),
    (None, '$SKT_1$', ('0.730',)),
    (None, 'Rank loss', ('0.788',)),
    (None, '$SKT_5$', ('0.791',)),
    (None, 'Pearson', ('0.797',)),
)
_VETE5 = (
    (None, 'MS COCO', ('0.417', '0.650', '0.780', '0.797')),
    (None, 'SBU', ('0.413', '0.632', '0.737', '0.775')),
    (None, 'Pinterest5M', ('0.408', '0.609', '0.753', '0.803')),
)
_VETE6 = (
    (None, 'Word-level', ('0.576', '0.617', '0.675', '0.371')),
    (None, 'Sentence-level', ('0.861', '0.855', '0.894', '0.579')),
)
_B1 = (
    (None, '', ('10.0', '4.1', '54.2', '70.1', '30', '41', '36', '', '51')),
    (None, '$CM$ (text)', ('24.2', '12.8', '41.7', '74.8', '52', '76', '42', '37', '55')),
    (None, '$\\mathbf{P}_{id}$', ('21.1', '37.9', '42.2', '69.3', '45', '66', '41', '34', '54')),
    (None, '$\\mathbf{C}_{id}$', ('27.5', '10.5', '2.9', '84.7', '60', '83', '45', '20', '55')),
    (None, '$\\mathbf{C}_{id} + \\mathbf{P}_{id}$', ('27.9', '25.8', '6.7', '82.6', '61', '84', '46', '28', '57')),
    (None, 'CM (vis.)', ('27.1', '19.2', '1.5', '85.8', '56', '78', '40', '34', '55.')),
    (None, '${\\bf P}_g$', ('21.3', '32.4', '43.9', '73.3', '45', '66', '41', '37', '53')),
    (None, '$\\mathbf{C}_g$', ('28.6', '9.4', '1.1', '88.5', '62', '83', '46', '29', '59')),
    (None, '$+{\\bf P}_a$', ('28.9', '29.1', '4.7', '87.5', '63', '84', '48', '33', '60')),
)
_B3 = (
    (None, '$\\mathbf{T}_{1024}$', (
        '$72.7*$', '$75.2*$', '$90.6*$', '$84.7*$', '$71.8*$', '$76.2*$', '$68.8*$', '$79.3*$', '77.4',
    )),
    (None, 'GS-Cap', ('$72.0*$', '$76.8*$', '$90.7*$', '$85.5*$', '72.9/80.6', '$76.7*$', '73.7', '82.9', '78.4')),
    (None, '$GS$ -Img', (
        '$74.5*$', '$79.3*$', '$90.8*$', '$87.8*$', '73.0/80.3', '$80.0*$', '$72.2*$', '$80.9*$', '79.8',
    )),
    (None, 'GS-Both', (
        '$72.5*$', '$75.7*$', '$90.7*$', '$85.4*$', '72.9/81.3', '$76.7*$', '$72.2*$', '$81.4*$', '78.4',
    )),
    (None, 'Т', ('$75.9*$', '$79.2*$', '92.0', '$86.7*$', '72.2/80.2', '$81.8*$', '$72.0*$', '$81.1*$', '80.1')),
    (None, '$T + CM$', ('77.6', '81.4', '92.6', '88.3', '73.5/81.1', '$82.0*$', '73.0', '$81.4*$', '81.1')),
    (None, '<b>SEQ</b>', (
        '$76.1*$', '$79.8*$', '92.5', '$86.7*$', '$70.0*$', '$81.7*$', '$67.3*$', '$76.7*$', '78.9',
    )),
    (None, '$\\mathbf{T}+\\mathbf{P}_{id}$', (
        '77.5', '81.5', '92.7', '88.4', '73.7/81.3', '82.4', '72.4', '81.1', '81.2',
    )),
    (None, '$\\mathbf{T}+\\mathbf{P}_q$', (
        '77.8', '81.8', '93.0', '88.1', '73.3/81.6', '83.5', '72.8', '82.2', '81.6',
    )),
    (None, '$\\mathbf{T}+\\mathbf{C}_{id}$', (
        '77.5', '81.6', '92.8', '88.3', '72.9/80.5', '82.2', '73.1', '82.3', '81.3',
    )),
    (None, '$\\mathbf{T}+\\mathbf{C}_q$', (
        '77.3', '81.5', '92.8', '88.6', '73.6/81.1', '82.6', '74.1', '82.6', '81.6',
    )),
    (None, '$\\mathbf{T} + \\mathbf{C}_{id} + \\mathbf{P}_{id}$', (
        '77.3', '81.2', '93.0', '88.4', '73.0/80.6', '82.5', '73.5', '82.1', '81.4',
    )),
    (None, '$\\mathbf{T} + \\mathbf{C}_a + \\mathbf{P}_a$', (
        '77.4', '81.5', '93.0', '88.1', '73.2/80.9', '82.7', '73.9', '82.9', '81.6',
    )),
)
_M2 = (
    (None, '[27]', ('11.8±2.0', '32.1±2.9', '44.7±3.1', '12.4', '16.5±2.3', '40.6±3.0', '54.2±3.1', '7.6')),
    (None, '[24]', ('20.3±2.5', '47.6±3.1', '61.7±3.0', '5.0', '24.8±2.7', '53.7±3.1', '67.1±2.9', '5.0')),
    (None, '[25]', ('21.2±2.5', '50.0±3.1', '64.8±3.0', '5.0', '31.0±2.9', '59.3±3.0', '73.7±2.7', '4.0')),
    (None, '[30]', ('26.9±2.7', '-', '69.6±2.9', '4.0', '32.4±2.9', '-', '73.6±2.7', '3.0')),
    (None, '[31]', ('-', '-', '-', '-', '36.3±3.0', '66.4±2.9', '78.2±2.6', '-')),
    (None, 'char-GRU', ('27.5±2.8', '58.2±3.1', '70.5±2.8', '4.0', '38.5±3.0', '68.9±2.9', '79.3±2.5', '2.0')),
)
_M3 = (
    ('1k results', '[25]', ('25.1±1.2', '59.8±1.4', '76.6±1.2', '4.0', '39.4±1.4', '67.9±1.3', '80.9±1.1', '2.0')),
    ('1k results', '[24]', ('32.6±1.3', '68.6±1.3', '82.8±1.0', '3.0', '42.8±1.4', '73.1±1.2', '84.1±1.0', '2.0')),
    ('1k results', '[28]', ('37.9±1.3', '-', '85.9±1.0', '2.0', '46.7±1.4', '-', '88.9±0.9', '2.0')),
    ('1k results', '[29]', ('52.0±1.4', '84.3±1.0', '92.0±0.8', '1.0', '64.6±1.3', '90.0±0.8', '95.7±0.6', '1.0')),
    ('1k results', '[30]', ('40.4±1.4', '-', '88.6±0.9', '2.0', '49.5±1.4', '-', '91.3±0.8', '1.6')),
    ('1k results', 'char-GRU', (
        '41.4±1.4', '76.8±1.2', '88.0±0.9', '2.0', '51.2±1.4', '83.5±1.0', '92.1±0.7', '1.2',
    )),
    ('5k results', '[25]', ('10.8±0.9', '28.3±1.2', '40.1±1.4', '17.0', '17.3±1.0', '39.0±1.4', '50.2±1.4', '10.0')),
    ('5k results', '[28]', ('18.0±1.1', '-', '57.6±1.4', '7.0', '23.3±1.2', '-', '65.0±1.3', '5.0')),
    ('5k results', '[29]', ('30.3±1.3', '59.4±1.4', '72.4±1.2', '4.0', '41.3±1.4', '71.1±1.3', '81.2±1.1', '2.0')),
    ('5k results', '[12]', ('17.1±1.0', '43.0±1.4', '57.3±1.4', '8.0', '27.1±1.2', '55.6±1.4', '70.0±1.3', '4.0')),
    ('5k results', 'char-GRU', (
        '20.2±1.1', '46.9±1.4', '60.9±1.4', '6.0', '25.7±1.2', '54.3±1.4', '68.8±1.3', '4.0',
    )),
)
_M5 = (
    ('STS 2012', 'MSRpar', (
        '42.3 <sup>+5.7</sup> <sub>-6.1</sub>', '40.0 <sup>+5.8</sup> <sub>-6.2</sub>',
        '49.1 <sup>+5.2</sup> <sub>-5.6</sub>', '37.6 <sup>+6.0</sup> <sub>-6.3</sub>',
    )),
    ('STS 2012', 'MSRvid', (
        '66.2 <sup>+3.8</sup> <sub>-4.2</sub>', '83.6 <sup>+2.0</sup> <sub>-2.3</sub>',
        '79.9 <sup>+2.4</sup> <sub>-2.7</sub>', '82.7 <sup>+2.1</sup> <sub>-2.4</sub>',
    )),
    ('STS 2012', 'SMTeuoparl', (
        '48.4 <sup>+6.7</sup> <sub>-7.3</sub>', '47.1 <sup>+6.8</sup> <sub>-7.4</sub>',
        '57.3 <sup>+5.8</sup> <sub>-6.5</sub>', '54.2 <sup>+6.2</sup> <sub>-6.8</sub>',
    )),
    ('STS 2012', 'OnWN', (
        '57.0 <sup>+4.6</sup> <sub>-5.0</sub>', '64.5 <sup>+4.0</sup> <sub>-4.4</sub>',
        '67.5 <sup>+3.7</sup> <sub>-4.1</sub>', '65.5 <sup>+3.9</sup> <sub>-4.3</sub>',
    )),
    ('STS 2012', 'SMTnews', (
        '46.3 <sup>+7.4</sup> <sub>-8.1</sub>', '60.7 <sup>+5.9</sup> <sub>-6.6</sub>',
        '51.1 <sup>+6.9</sup> <sub>-7.6</sub>', '38.7 <sup>+8.0</sup> <sub>-8.7</sub>',
    )),
    ('STS 2013', 'FNWN', (
        '38.2 <sup>+11.6</sup> <sub>-12.9</sub>', '34.5 <sup>+12.0</sup> <sub>-13.2</sub>',
        '23.8 <sup>+13.0</sup> <sub>-13.9</sub>', '23.2 <sup>+13.1</sup> <sub>-14.0</sub>',
    )),
    ('STS 2013', 'HDL', (
        '63.4 <sup>+4.1</sup> <sub>-4.5</sub>', '69.0 <sup>+3.6</sup> <sub>-3.9</sub>',
        '67.3 <sup>+3.7</sup> <sub>-4.1</sub>', '64.9 <sup>+4.0</sup> <sub>-4.3</sub>',
    )),
    ('STS 2013', 'OnWN', (
        '47.2 <sup>+6.2</sup> <sub>-6.7</sub>', '73.1 <sup>+3.6</sup> <sub>-4.1</sub>',
        '59.8 <sup>+5.1</sup> <sub>-5.6</sub>', '58.5 <sup>+5.2</sup> <sub>-5.7</sub>',
    )),
    ('STS 2014', 'Deft-forum', (
        '30.0 <sup>+8.2</sup> <sub>-8.7</sub>', '47.5 <sup>+6.9</sup> <sub>-7.5</sub>',
        '50.7 <sup>+6.6</sup> <sub>-7.2</sub>', '51.5 <sup>+6.5</sup> <sub>-7.1</sub>',
    )),
    ('STS 2014', 'Deft-news', (
        '65.0 <sup>+6.1</sup> <sub>-7.1</sub>', '72.9 <sup>+4.9</sup> <sub>-5.8</sub>',
        '67.8 <sup>+5.7</sup> <sub>-6.6</sub>', '65.3 <sup>+6.0</sup> <sub>-7.0</sub>',
    )),
    ('STS 2014', 'HDL', (
        '58.7 <sup>+4.5</sup> <sub>-4.9</sub>', '63.6 <sup>+4.1</sup> <sub>-4.5</sub>',
        '61.6 <sup>+4.3</sup> <sub>-4.6</sub>', '60.0 <sup>+4.4</sup> <sub>-4.8</sub>',
    )),
    ('STS 2014', 'Images', (
        '62.4 <sup>+4.2</sup> <sub>-4.6</sub>', '80.9 <sup>+2.3</sup> <sub>-2.6</sub>',
        '81.4 <sup>+2.3</sup> <sub>-2.6</sub>', '88.2 <sup>+1.5</sup> <sub>-1.7</sub>',
    )),
    ('STS 2014', 'OnWN', (
        '57.7 <sup>+4.6</sup> <sub>-5.0</sub>', '77.3 <sup>+2.7</sup> <sub>-3.1</sub>',
        '68.6 <sup>+3.6</sup> <sub>-4.0</sub>', '68.1 <sup>+3.7</sup> <sub>-4.0</sub>',
    )),
    ('STS 2014', 'Tweet-news', (
        '53.9 <sup>+4.9</sup> <sub>-5.3</sub>', '75.3 <sup>+2.9</sup> <sub>-3.3</sub>',
        '74.0 <sup>+3.1</sup> <sub>-3.4</sub>', '69.6 <sup>+3.5</sup> <sub>-3.9</sub>',
    )),
    ('STS 2015', 'Answers forum', (
        '36.7 <sup>+8.4</sup> <sub>-9.1</sub>', '61.3 <sup>+6.0</sup> <sub>-6.7</sub>',
        '57.6 <sup>+6.4</sup> <sub>-7.2</sub>', '49.4 <sup>+7.3</sup> <sub>-8.1</sub>',
    )),
    ('STS 2015', 'Answers student', (
        '63.6 <sup>+4.1</sup> <sub>-4.5</sub>', '68.6 <sup>+3.6</sup> <sub>-4.0</sub>',
        '68.8 <sup>+3.6</sup> <sub>-4.0</sub>', '67.1 <sup>+3.8</sup> <sub>-4.1</sub>',
    )),
    ('STS 2015', 'belief', (
        '44.8 <sup>+7.7</sup> <sub>-8.5</sub>', '71.8 <sup>+4.6</sup> <sub>-5.3</sub>',
        '71.8 <sup>+4.6</sup> <sub>-5.3</sub>', '66.5 <sup>+5.3</sup> <sub>-6.1</sub>',
    )),
    ('STS 2015', 'HDL', (
        '66.2 <sup>+3.8</sup> <sub>-4.2</sub>', '69.6 <sup>+3.5</sup> <sub>-3.9</sub>',
        '70.3 <sup>+3.4</sup> <sub>-3.8</sub>', '67.1 <sup>+3.8</sup> <sub>-4.1</sub>',
    )),
    ('STS 2015', 'Images', (
        '69.1 <sup>+3.6</sup> <sub>-3.9</sub>', '85.5 <sup>+1.8</sup> <sub>-2.1</sub>',
        '89.2 <sup>+1.4</sup> <sub>-1.6</sub>', '88.1 <sup>+1.5</sup> <sub>-1.7</sub>',
    )),
    ('STS 2016', 'Answer-Answer', (
        '40.1 <sup>+9.8</sup> <sub>-10.9</sub>', '62.0 <sup>+7.0</sup> <sub>-8.2</sub>',
        '53.8 <sup>+8.2</sup> <sub>-9.4</sub>', '47.8 <sup>+9.0</sup> <sub>-10.1</sub>',
    )),
    ('STS 2016', 'HDL', (
        '61.4 <sup>+7.2</sup> <sub>-8.4</sub>', '68.8 <sup>+6.0</sup> <sub>-7.2</sub>',
        '70.0 <sup>+5.8</sup> <sub>-6.9</sub>', '65.4 <sup>+6.6</sup> <sub>-7.7</sub>',
    )),
    ('STS 2016', 'Plagiarism', (
        '54.6 <sup>+8.5</sup> <sub>-9.8</sub>', '80.8 <sup>+4.1</sup> <sub>-5.0</sub>',
        '78.6 <sup>+4.5</sup> <sub>-5.5</sub>', '75.8 <sup>+5.0</sup> <sub>-6.1</sub>',
    )),
    ('STS 2016', 'Postediting', (
        '53.9 <sup>+8.3</sup> <sub>-9.6</sub>', '82.3 <sup>+3.7</sup> <sub>-4.5</sub>',
        '84.4 <sup>+3.3</sup> <sub>-4.0</sub>', '79.7 <sup>+4.2</sup> <sub>-5.1</sub>',
    )),
    ('STS 2016', 'Question-Question', (
        '47.2 <sup>+9.9</sup> <sub>-11.3</sub>', '63.3 <sup>+7.5</sup> <sub>-8.9</sub>',
        '40.5 <sup>+10.8</sup> <sub>-12.0</sub>', '49.9 <sup>+9.5</sup> <sub>-10.9</sub>',
    )),
    ('STS-B', 'STS 12-16', (
        '64.7 <sup>+3.0</sup> <sub>-3.2</sub>', '75.7 <sup>+2.2</sup> <sub>-2.3</sub>',
        '72.2 <sup>+2.4</sup> <sub>-2.6</sub>', '70.7 <sup>+2.5</sup> <sub>-2.7</sub>',
    )),
    ('SICK', 'Relatedness', (
        '79.9 <sup>+1.0</sup> <sub>-1.0</sub>', '86.2 <sup>+0.7</sup> <sub>-0.7</sub>',
        '81.5 <sup>+0.9</sup> <sub>-1.0</sub>', '82.7 <sup>+0.9</sup> <sub>-0.9</sub>',
    )),
)
_K1 = (
    (None, 'Embedding Network [2]', ('43.2', '71.6', '79.8', '31.7', '61.3', '72.4')),
    (None, 'VSE++[3]', ('51.3', '82.2', '91.0', '40.1', '75.3', '86.1')),
    (None, 'Our model with VGG19 image encoder and $K = 1$ hard negative', (
        '19.6', '43.0', '56.2', '15.3', '36.7', '48.7',
    )),
    (None, 'Our model with ResNet50 image encoder and $K = 1$ hard negative', (
        '13.6', '24.4', '36.1', '11.8', '23.6', '32.4',
    )),
    (None, 'Our model with VGG19 image encoder and $K = 10$ hard negative', (
        '3.5', '12.5', '16.7', '2.9', '10.9', '14.5',
    )),
    (None, 'Our model with ResNet50 image encoder and $K = 10$ hard negative', (
        '3.6', '10.2', '18.6', '3.4', '8.9', '15.3',
    )),
)
_K2 = (
    (None, 'Embedding Network [2]', ('54.9', '84.0', '92.2', '43.3', '76.4', '87.5')),
    (None, 'VSE++[3]', ('64.6', '90.0', '95.7', '52.0', '84.3', '92.3')),
    (None, 'Our model with VGG19 image encoder and $K = 1$ hard negative', (
        '30.5', '59.5', '72.5', '21.8', '53.0', '69.2',
    )),
    (None, 'Our model with ResNet50 image encoder and $K = 1$ hard negative', (
        '10.7', '35.5', '51.3', '8.9', '29.7', '45.1',
    )),
    (None, 'Our model with VGG19 image encoder and $K = 10$ hard negative', (
        '2.9', '12.9', '20.9', '3.5', '11.4', '18.9',
    )),
    (None, 'Our model with ResNet50 image encoder and $K = 10$ hard negative', (
        '5.6', '19.4', '30.1', '6.1', '19.3', '30.9',
    )),
)


# ----------------------------------------------------------------------------- how to read them

_COCO_ONE = "MS COCO 2014 train (im2txt split), one caption per image (§4.1)"
_INCEPTION = "InceptionV3, 2048-d (§3)"
_VETE_COLS = ("images2014", "images2015", "COCO-Test", "Pin-Test")
_VETE_OURS = {"images2014": "STS14/images", "images2015": "STS15/images", "avg2014": "STS14/mean",
              "avg2015": "STS15/mean"}
_VETE_TEXT_ONLY = {"Word2Vec": "none (text only)", "PureTextRnn": "none (text only)"}
_VETE_NOTE = ("COCO-Test / Pin-Test are the paper's own same-image tests (§4.3; our "
              "evaluate_same_image builds the same kind of test from Flickr8k, a different test set).")
_BORDES_FEATURES = {"*": "InceptionV3, 2048-d (§4.4)", "": "none (text only)",
                    "$\\mathbf{T}_{1024}$": "none (text only)",
                    "Т": "none (text only)"}
_MERKX_CITED = "as in the cited system (this paper does not restate it)"
_MERKX_FLICKR8K = "Flickr8k train, 6,000 images × 5 captions (Karpathy split [27], §3.2.1)"
_MERKX_RET_COLS = tuple(f"{d} {m}" for d in ("caption→image", "image→caption") for m in ("R@1", "R@5", "R@10", "medr"))
_MERKX_RET_SCALE = {c: ("median rank" if c.endswith("medr") else "R@K %") for c in _MERKX_RET_COLS}


def _merkx_ret_ours(protocol: str) -> dict:
    keys = {"caption→image": "caption_to_image", "image→caption": "image_to_caption"}
    return {c: f"{protocol}/{keys[c.split(' ')[0]]}/{c.split(' ')[1]}" for c in _MERKX_RET_COLS}


# Merkx & Frank Table 5 rows → our evaluate_sts subset keys (STS14/15: present only when their folders are).
_MERKX_STS = {
    ("STS 2012", "MSRpar"): "STS12/MSRpar", ("STS 2012", "MSRvid"): "STS12/MSRvid",
    ("STS 2012", "SMTeuoparl"): "STS12/SMTeuroparl", ("STS 2012", "OnWN"): "STS12/surprise.OnWN",
    ("STS 2012", "SMTnews"): "STS12/surprise.SMTnews",
    ("STS 2013", "FNWN"): "STS13/FNWN", ("STS 2013", "HDL"): "STS13/headlines", ("STS 2013", "OnWN"): "STS13/OnWN",
    ("STS 2014", "Deft-forum"): "STS14/deft-forum", ("STS 2014", "Deft-news"): "STS14/deft-news",
    ("STS 2014", "HDL"): "STS14/headlines", ("STS 2014", "Images"): "STS14/images",
    ("STS 2014", "OnWN"): "STS14/OnWN",
    ("STS 2014", "Tweet-news"): "STS14/tweet-news",
    ("STS 2015", "Answers forum"): "STS15/answers-forums", ("STS 2015", "Answers student"): "STS15/answers-students",
    ("STS 2015", "belief"): "STS15/belief", ("STS 2015", "HDL"): "STS15/headlines",
    ("STS 2015", "Images"): "STS15/images",
    ("STS 2016", "Answer-Answer"): "STS16/answer-answer", ("STS 2016", "HDL"): "STS16/headlines",
    ("STS 2016", "Plagiarism"): "STS16/plagiarism", ("STS 2016", "Postediting"): "STS16/postediting",
    ("STS 2016", "Question-Question"): "STS16/question-question",
}
_KOLLURU_COLS = tuple(f"{d} {m}" for d in ("image→sentence", "sentence→image") for m in ("R@1", "R@5", "R@10"))
_KOLLURU_FEATURES = {"*": "VGG19 (4096-d) or ResNet50 (stated as 512-d) penultimate FC, as the row says (§3.1); "
                          "text: mean of 300-d GloVe vectors",
                     "Embedding Network [2]": "as in the cited system", "VSE++[3]": "as in the cited system"}
_KOLLURU_NOTE = "Flickr30K / MSCOCO 1,000-image test sets (§4.1): not among our test sets."

_SPECS = {
    ("kurach2017_vete", "Table 1"): (TableSpec(
        "kurach2017_vete", "Table 1", "Model\timagess2014", "Table 1:", "\t", 0, 1,
        _VETE_COLS + ("avg2014", "avg2015"), "Pearson r",
        {"*": _COCO_ONE}, {"*": _INCEPTION, **_VETE_TEXT_ONLY}, _VETE_OURS,
        "avg2014 / avg2015: the average over the STS 2014 / 2015 subsets (§4.3). " + _VETE_NOTE), _VETE1),
    ("kurach2017_vete", "Table 2"): (TableSpec(
        "kurach2017_vete", "Table 2", "Model\timages2014", "Table 2:", "\t", 0, 1, _VETE_COLS, "Pearson r",
        {"*": "as the row says (§4.4)", "PinModelA": _COCO_ONE, "VETE-BOW (our)": _COCO_ONE,
         "Glove (R)": "Common Crawl, 840B tokens (§4.4)", "Glove (NR)": "Common Crawl, 840B tokens (§4.4)",
         "M-Skip-Gram (R)": "Wikipedia and ImageNet images (§4.4)",
         "M-Skip-Gram (NR)": "Wikipedia and ImageNet images (§4.4)",
         "PP-XXL (R)": "9M PPDB phrase pairs (§4.4)", "PP-XXL (NR)": "9M PPDB phrase pairs (§4.4)",
         "Best SemEval": "SemEval 2014/2015 best systems, no data restriction (§4.4)"},
        {"*": "none (text only)", "PinModelA": _INCEPTION, "VETE-BOW (our)": _INCEPTION,
         "M-Skip-Gram (R)": "as in Lazaridou et al. 2015", "M-Skip-Gram (NR)": "as in Lazaridou et al. 2015",
         "Best SemEval": "as in the SemEval systems"},
        {"images2014": "STS14/images", "images2015": "STS15/images"},
        "(R): vocabulary restricted to MS COCO's; (NR): not restricted. " + _VETE_NOTE), _VETE2),
    ("kurach2017_vete", "Table 3"): (TableSpec(
        "kurach2017_vete", "Table 3", "Encoder\timages2014", "Loss type\tAvg score", "\t", 0, 1, _VETE_COLS,
        "Pearson r", {"*": _COCO_ONE}, {"*": _INCEPTION}, {"images2014": "STS14/images", "images2015": "STS15/images"},
        "VETE with four text encoders (§5.1). " + _VETE_NOTE), _VETE3),
    ("kurach2017_vete", "Table 4"): (TableSpec(
        "kurach2017_vete", "Table 4", "Loss type\tAvg score", "Table 3:", "\t", 0, 1, ("Avg score",),
        "mean Pearson r over images2014, images2015, COCO-Test and Pin-Test (§5.3)", {"*": _COCO_ONE},
        {"*": _INCEPTION}, {}, "VETE-BOW with six losses (§5.2)."), _VETE4),
    ("kurach2017_vete", "Table 5"): (TableSpec(
        "kurach2017_vete", "Table 5", "Train Dataset\tWord2Vec", "Table 5:", "\t", 0, 1,
        ("Word2Vec", "PinModelA", "VETE-RNN", "VETE-BOW"),
        "mean Pearson r over images2014, images2015, COCO-Test and Pin-Test (§5.3)",
        {"*": "as the row says", "MS COCO": _COCO_ONE, "SBU": "SBU, 900k train pairs (§4.1)",
         "Pinterest5M": "Pinterest5M, 3.8M train pairs, one caption per image (§4.1)"},
        {"*": _INCEPTION, "Word2Vec": "none (text only)"}, {},
        "The row is the training set, the column the model (Word2Vec: text only)."), _VETE5),
    ("kurach2017_vete", "Table 6"): (TableSpec(
        "kurach2017_vete", "Table 6", "Model\timages2014", "Table 6:", "\t", 0, 1, _VETE_COLS, "Pearson r",
        {"*": _COCO_ONE}, {"*": _INCEPTION}, {"images2014": "STS14/images", "images2015": "STS15/images"},
        "VETE-BOW trained per word vs per sentence (§5.4). " + _VETE_NOTE), _VETE6),
    ("bordes2019_grounded_space", "Table 1"): (TableSpec(
        "bordes2019_grounded_space", "Table 1", "Model\tmNNO", "Table 1:", "\t", 0, 1,
        ("mNNO", "ρ_vis", "C_inter", "C_intra", "STS/All", "STS/Cap", "STS/News", "STS/Forum", "SICK"),
        {"mNNO": "mNNO × 100 (K not stated)", "ρ_vis": "Pearson r × 100", "C_inter": "mean cosine × 100",
         "C_intra": "mean cosine × 100", "STS/All": "Spearman ρ × 100", "STS/Cap": "Spearman ρ × 100",
         "STS/News": "Spearman ρ × 100", "STS/Forum": "Spearman ρ × 100", "SICK": "Spearman ρ × 100"},
        {"*": "MS COCO train (118K images, 5 captions each), grounding losses only: the textual loss is "
              "discarded in this table (§5.1)", "": "BookCorpus (SkipThought, §4.1)"},
        _BORDES_FEATURES,
        {"STS/All": "STSBenchmark/test", "STS/Cap": "STSBenchmark/test/captions", "STS/News": "STSBenchmark/test/news",
         "STS/Forum": "STSBenchmark/test/forum", "SICK": "SICK/test"},
        "Structural measures on the MS COCO validation set (5K images, §4.3); the STS split is not stated. "
        "Row '' is T (its label is lost in the Markdown copy); '$+{\\bf P}_a$' is C_g + P_g."), _B1),
    ("bordes2019_grounded_space", "Table 3"): (TableSpec(
        "bordes2019_grounded_space", "Table 3", "Model\tMR", "Table 3:", "\t", 1, 2,
        ("MR", "CR", "SUBJ", "MPQA", "MRPC", "SST", "SNLI", "SICK", "AVG"),
        {"*": "accuracy %", "MRPC (F1)": "F1 %"},
        {"*": "BookCorpus (L_T) and MS COCO train (grounding, §4.1)",
         "$\\mathbf{T}_{1024}$": "BookCorpus (SkipThought, §4.1)", "Т": "BookCorpus (SkipThought, §4.1)"},
        _BORDES_FEATURES,
        {"MR": "transfer/MR", "CR": "transfer/CR", "SUBJ": "transfer/SUBJ", "MPQA": "transfer/MPQA",
         "MRPC (acc)": "transfer/MRPC", "MRPC (F1)": "transfer/MRPC/f1", "SST": "transfer/SST2",
         "SICK": "transfer/SICKEntailment"},
        "SentEval logistic regression (§4.3). '*': significantly differs from the best scenario. Row 'Т' "
        "(printed with a Cyrillic letter) is T; SNLI has no training set in our data."), _B3),
    ("merkx2019_char_grounding", "Table 2"): (TableSpec(
        "merkx2019_char_grounding", "Table 2", "Table 2: Image-Caption retrieval results on the Flickr8k",
        "Due to the clear drop", "\t", 0, 1,
        _MERKX_RET_COLS, _MERKX_RET_SCALE,
        {"*": _MERKX_CITED, "char-GRU": _MERKX_FLICKR8K},
        {"*": _MERKX_CITED, "char-GRU": "ResNet-152, 2048-d, mean of 10 crops (§3.2.1)"},
        _merkx_ret_ours("flickr8k_1k"),
        "The ± is the 95 % interval; it matches a normal interval over 1,000 queries in both directions."), _M2),
    ("merkx2019_char_grounding", "Table 3"): (TableSpec(
        "merkx2019_char_grounding", "Table 3", "Table 3: Image-Caption retrieval results on the MSCOCO",
        "### 4.3", "\t", 0, 1,
        _MERKX_RET_COLS, _MERKX_RET_SCALE,
        {"*": _MERKX_CITED, "char-GRU": "MSCOCO train, 113,287 images × 5 captions (§3.2.2)"},
        {"*": _MERKX_CITED, "char-GRU": "ResNet-152, 2048-d, mean of 10 crops (§3.2)"}, {},
        "MSCOCO is not among our test sets (our protocols coco_5fold_1k / coco_5k compute the same figures)."), _M3),
    ("merkx2019_char_grounding", "Table 5"): (TableSpec(
        "merkx2019_char_grounding", "Table 5", "Table 5: Semantic textual similarity results", "", "\t", 1, 2,
        ("BOW", "InferSent", "char-GRU (Flickr8k)", "char-GRU (MSCOCO)"), "Pearson r × 100",
        {"*": "", "BOW": "none (average of GloVe 840B vectors)", "InferSent": "SNLI, on GloVe 840B vectors ([10])",
         "char-GRU (Flickr8k)": _MERKX_FLICKR8K,
         "char-GRU (MSCOCO)": "MSCOCO train, 113,287 images × 5 captions (§3.2.2)"},
        {"*": "", "BOW": "none (text only)", "InferSent": "none (text only)",
         "char-GRU (Flickr8k)": "ResNet-152, 2048-d, mean of 10 crops (§3.2.1)",
         "char-GRU (MSCOCO)": "ResNet-152, 2048-d, mean of 10 crops (§3.2.1)"},
        _MERKX_STS,
        "STS-B and SICK-R are SentEval's supervised protocol (a regressor trained on the embeddings, §3.4): "
        "not our unsupervised cosine figures, so ours is None for them."), _M5),
    ("kolluru_two_branch", "Table 1"): (TableSpec(
        "kolluru_two_branch", "Table 1", "Table 1:", "Table 2:", "|", 2, 3, _KOLLURU_COLS, "R@K %",
        {"*": "Flickr30K train, 29,783 images × 5 captions (§4.1)", "Embedding Network [2]": "as in the cited system",
         "VSE++[3]": "as in the cited system"}, _KOLLURU_FEATURES, {}, _KOLLURU_NOTE), _K1),
    ("kolluru_two_branch", "Table 2"): (TableSpec(
        "kolluru_two_branch", "Table 2", "Table 2:", "respectively. We also present", "|", 2, 3,
        _KOLLURU_COLS, "R@K %",
        {"*": "MSCOCO train, about 121,000 images × 5 captions (§4.1)",
         "Embedding Network [2]": "as in the cited system",
         "VSE++[3]": "as in the cited system"}, _KOLLURU_FEATURES, {}, _KOLLURU_NOTE), _K2),
}
TABLES: dict[tuple[str, str], TableSpec] = {k: spec for k, (spec, _) in _SPECS.items()}

_NUMBER = r"\d+(?:\.\d*)?"


def parse_cell(cell: str) -> list[tuple[float, float | None, float | None]]:
    """A printed cell → ``[(value, plus, minus), ...]`` (two entries for ``acc/F1``).

    Reads ``0.861``, ``$72.7*$``, ``55.``, ``27.5±2.8`` and ``79.9 <sup>+2.4</sup> <sub>-2.7</sub>``.

    Raises:
      ValueError: a cell in none of these forms.
    """
    text = cell.strip().strip("$").rstrip("*").strip()
    m = re.fullmatch(rf"({_NUMBER})/({_NUMBER})", text)
    if m:
        return [(float(m.group(1)), None, None), (float(m.group(2)), None, None)]
    m = re.fullmatch(rf"({_NUMBER})±({_NUMBER})", text)
    if m:
        return [(float(m.group(1)), float(m.group(2)), float(m.group(2)))]
    m = re.fullmatch(rf"({_NUMBER}) <sup>\+({_NUMBER})</sup> <sub>-({_NUMBER})</sub>", text)
    if m:
        return [(float(m.group(1)), float(m.group(2)), float(m.group(3)))]
    m = re.fullmatch(_NUMBER, text)
    if m:
        return [(float(text), None, None)]
    raise ValueError(f"Cannot read the table cell {cell!r}.")


def _pick(table_value, row: str, column: str) -> str:
    if isinstance(table_value, str):
        return table_value
    for key in (row, column):
        if key in table_value:
            return table_value[key]
    return table_value["*"]


def _build() -> tuple[PaperFigure, ...]:
    out = []
    for (paper, table), (spec, rows) in _SPECS.items():
        for block, label, cells in rows:
            if len(cells) != len(spec.columns):
                raise AssertionError(f"{paper} {table} row {label!r}: {len(cells)} cells, {len(spec.columns)} columns")
            for column, cell in zip(spec.columns, cells):
                if cell in ("", "-", "N/A"):
                    continue
                parsed = parse_cell(cell)
                names = [column] if len(parsed) == 1 else [f"{column} (acc)", f"{column} (F1)"]
                for name, (value, plus, minus) in zip(names, parsed):
                    out.append(PaperFigure(
                        paper=paper, table=table, block=block, row=label, column=name, value=value, plus=plus,
                        minus=minus, scale=_pick(spec.scale, label, name),
                        training_data=_pick(spec.training_data, label, column),
                        image_features=_pick(spec.image_features, label, column),
                        ours=spec.ours.get((block, label), spec.ours.get(name)), printed=cell, note=spec.note))
    return tuple(out)


PUBLISHED_FIGURES: tuple[PaperFigure, ...] = _build()


def figures(paper: str | None = None, table: str | None = None, ours: str | None = None) -> list[PaperFigure]:
    """The records matching every given filter (``paper`` key, ``"Table 2"``, our key).

    Raises:
      ValueError: an unknown paper key.
    """
    if paper is not None and paper not in PAPER_SOURCES:
        raise ValueError(f"Unknown paper {paper!r}; choose one of {sorted(PAPER_SOURCES)}.")
    return [f for f in PUBLISHED_FIGURES if (paper is None or f.paper == paper) and (table is None or f.table == table)
            and (ours is None or f.ours == ours)]


def counts() -> dict[str, int]:
    """Number of records per ``"paper Table N"``."""
    out: dict[str, int] = {}
    for f in PUBLISHED_FIGURES:
        out[f"{f.paper} {f.table}"] = out.get(f"{f.paper} {f.table}", 0) + 1
    return out
