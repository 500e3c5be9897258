"""A BERT encoder (Devlin et al. 2019) at the compact sizes of Turc et al. 2019, "Well-Read Students Learn Better"
(arXiv:1908.08962; the google-research/bert miniatures): word, position and token-type embeddings, post-norm
Transformer layers with GELU feed-forward, and the tanh pooler over [CLS], as in the reference code.

Attention is written out as MatMul, scale, additive mask and Softmax, so the ONNX graph holds the ops an edge
runtime sees in an exported BERT (MatMul, Softmax, LayerNormalization, Gather) rather than a fused attention op.
Token types are all zero (one segment), as a tokenizer gives for a single sentence."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

_EPS = 1e-12  # the reference's LayerNorm epsilon


class _Layer(nn.Module):
    def __init__(self, hidden: int, heads: int, intermediate: int) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attention_out = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=_EPS)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = nn.Linear(intermediate, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=_EPS)

    def _heads(self, x: Tensor) -> Tensor:
        batch, seq, _ = x.shape
        return x.reshape(batch, seq, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: Tensor, mask_bias: Tensor) -> Tensor:
        batch, seq, hidden = x.shape
        query, key, value = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        scores = torch.matmul(query, key.transpose(-1, -2)) * (1.0 / math.sqrt(self.head_dim)) + mask_bias
        context = torch.matmul(torch.softmax(scores, dim=-1), value).transpose(1, 2).reshape(batch, seq, hidden)
        x = self.attention_norm(x + self.attention_out(context))
        return self.output_norm(x + self.output(nn.functional.gelu(self.intermediate(x))))


class BertEncoder(nn.Module):
    """forward(input_ids, attention_mask), both [batch, seq] int64 (mask 0: padding) -> (last hidden state
    [batch, seq, hidden], pooled [CLS] [batch, hidden])."""

    def __init__(self, layers: int, hidden: int, heads: int, intermediate: int, vocab: int = 30522,
                 max_positions: int = 512, token_types: int = 2) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_positions, hidden)
        self.token_type = nn.Embedding(token_types, hidden)
        self.embedding_norm = nn.LayerNorm(hidden, eps=_EPS)
        self.layers = nn.ModuleList(_Layer(hidden, heads, intermediate) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> tuple[Tensor, Tensor]:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.word(input_ids) + self.position(positions) + self.token_type(torch.zeros_like(input_ids))
        x = self.embedding_norm(x)
        # Padding (mask 0) gets the most negative float before the softmax, as the reference's extended mask does.
        mask_bias = (attention_mask[:, None, None, :] == 0).to(x.dtype) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x, torch.tanh(self.pooler(x[:, 0]))
