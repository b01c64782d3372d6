"""Sequence workloads: an encoder-decoder Transformer and an LSTM language model."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

PAD, BOS = 0, 1
FIRST_TOKEN = 2


def reversal_pairs(
    seed: int, num_samples: int, vocab: int, length: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Source sequences and their reversals: a translation task a tiny Transformer learns."""
    generator = torch.Generator().manual_seed(seed)
    source = torch.randint(FIRST_TOKEN, vocab, (num_samples, length), generator=generator)
    return source, source.flip(1)


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int, length: int, d_model: int = 32, heads: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Parameter(torch.randn(length, d_model) * 0.1)
        self.transformer = nn.Transformer(
            d_model,
            heads,
            num_encoder_layers=1,
            num_decoder_layers=1,
            dim_feedforward=64,
            dropout=0.1,
            batch_first=True,
        )
        self.out = nn.Linear(d_model, vocab)
        self.register_buffer("causal", nn.Transformer.generate_square_subsequent_mask(length))

    def forward(self, source: torch.Tensor, target_in: torch.Tensor) -> torch.Tensor:
        src = self.embed(source) + self.position
        tgt = self.embed(target_in) + self.position
        return self.out(self.transformer(src, tgt, tgt_mask=self.causal, tgt_is_causal=True))


def translation_loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    source, target = batch
    # Teacher forcing: the decoder sees BOS and the target shifted right.
    target_in = torch.cat([torch.full_like(target[:, :1], BOS), target[:, :-1]], dim=1)
    logits = model(source, target_in)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))


def markov_windows(seed: int, num_windows: int, vocab: int, window: int) -> torch.Tensor:
    """Windows of `window + 1` tokens from one stream of a seeded sparse Markov chain."""
    generator = torch.Generator().manual_seed(seed)
    # Each token has four likely successors: a language with structure an LSTM can learn.
    successors = torch.randint(0, vocab, (vocab, 4), generator=generator)
    length = num_windows * window + 1
    choices = torch.randint(0, 4, (length,), generator=generator).tolist()
    table = successors.tolist()
    tokens = [0] * length
    for index in range(1, length):
        tokens[index] = table[tokens[index - 1]][choices[index]]
    stream = torch.tensor(tokens)
    return stream.unfold(0, window + 1, window)


class LstmLanguageModel(nn.Module):
    def __init__(self, vocab: int, embedding: int = 32, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embedding)
        self.lstm = nn.LSTM(embedding, hidden, num_layers=2, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        output, _ = self.lstm(self.embed(tokens))
        return self.out(output)


def language_model_loss(model: nn.Module, batch: tuple[torch.Tensor, ...]) -> torch.Tensor:
    (windows,) = batch
    logits = model(windows[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), windows[:, 1:].reshape(-1))
