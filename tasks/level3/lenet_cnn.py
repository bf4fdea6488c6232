import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """LeNet-style CNN for 3x32x32 images: two 5x5 conv + ReLU + max-pool stages,
    then three fully connected layers."""

    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, kernel_size=5)
        self.conv2 = nn.Conv2d(32, 64, kernel_size=5)
        self.fc1 = nn.Linear(64 * 5 * 5, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


batch_size = 8192
num_classes = 10


def get_inputs():
    return [torch.randn(batch_size, 3, 32, 32)]


def get_init_inputs():
    return [num_classes]
