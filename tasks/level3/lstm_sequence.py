import torch
import torch.nn as nn


class Model(nn.Module):
    """Two-layer LSTM over a short sequence, followed by a linear head applied at every step."""

    def __init__(self, input_size, hidden_size, num_layers, output_size):
        super().__init__()
        self.lstm = nn.LSTM(input_size, hidden_size, num_layers=num_layers, batch_first=True)
        self.head = nn.Linear(hidden_size, output_size)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.head(out)


batch_size = 256
seq_len = 64
input_size = 256
hidden_size = 512
num_layers = 2
output_size = 128


def get_inputs():
    return [torch.randn(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers, output_size]
