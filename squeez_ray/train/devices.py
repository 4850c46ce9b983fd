"""Known accelerators for memory plans and MFU: memory and dense bf16 peak, by a short name (``--device a100-80gb``)."""

from __future__ import annotations

from dataclasses import dataclass

GiB = 1024 ** 3


@dataclass(frozen=True)
class Device:
    name: str
    memory_bytes: int
    bf16_tflops: float | None  # dense (no sparsity) tensor-core peak; None for CPUs
    kind: str = "gpu"  # "gpu" | "cpu"


# Usable memory as CUDA reports it (an "80 GB" A100 shows ~79.2 GiB); dense bf16 peaks from the data sheets.
KNOWN_DEVICES = {
    "a100-40gb": Device("a100-40gb", int(39.4 * GiB), 312.0),
    "a100-80gb": Device("a100-80gb", int(79.2 * GiB), 312.0),
    "h100-80gb": Device("h100-80gb", int(79.2 * GiB), 989.0),  # SXM; PCIe: 756
    "h200": Device("h200", int(139.8 * GiB), 989.0),
    "l40s": Device("l40s", int(44.4 * GiB), 362.0),
    "l4": Device("l4", int(22.0 * GiB), 121.0),
    "a10g": Device("a10g", int(22.0 * GiB), 70.0),
}
# Substrings of torch.cuda.get_device_name() -> table entry (for the bf16 peak of a detected card).
_NAME_HINTS = (("H200", "h200"), ("H100", "h100-80gb"), ("A100", "a100-80gb"), ("L40S", "l40s"), ("L4", "l4"),
               ("A10G", "a10g"))


# Ray's accelerator_type names (ray.util.accelerators; what a ScalingConfig or a node reports) -> the card
# to plan for. Ray calls both A100 sizes "A100": plan for the smaller one, since only the real device
# (the workers' probe, squeez_ray.train.fit_check) can tell them apart.
ACCELERATOR_TYPES = {"H100": "h100-80gb", "H200": "h200", "A100": "a100-40gb", "A100-40G": "a100-40gb",
                     "A100-80G": "a100-80gb", "L40S": "l40s", "L4": "l4", "A10G": "a10g"}
# The cluster launcher's GPU instance types (cluster.yaml) -> the card each one carries.
EC2_INSTANCE_DEVICES = {"p4d.24xlarge": "a100-40gb", "p4de.24xlarge": "a100-80gb", "p5.48xlarge": "h100-80gb",
                        "p5e.48xlarge": "h200", "p5en.48xlarge": "h200", "g6e.xlarge": "l40s", "g6.xlarge": "l4",
                        "g5.xlarge": "a10g"}


class UnknownDevice(ValueError):
    pass


def accelerator_device(accelerator_type: str) -> Device:
    """The card a Ray ``accelerator_type`` declares (UnknownDevice names the known ones)."""
    if accelerator_type not in ACCELERATOR_TYPES:
        raise UnknownDevice(f"unknown accelerator_type {accelerator_type!r}; known: {', '.join(ACCELERATOR_TYPES)}")
    return KNOWN_DEVICES[ACCELERATOR_TYPES[accelerator_type]]


def named_device(name: str) -> Device:
    key = name.lower()
    if key == "cpu":
        return cpu_device()
    if key not in KNOWN_DEVICES:
        raise UnknownDevice(f"unknown device {name!r}; known: cpu, {', '.join(KNOWN_DEVICES)}")
    return KNOWN_DEVICES[key]


def cpu_device() -> Device:
    import psutil

    return Device("cpu", int(psutil.virtual_memory().total), None, kind="cpu")


def detect_device() -> Device | None:
    """The first CUDA device here (its real memory, the table's bf16 peak), or None without one."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    return cuda_device(torch.cuda.get_device_name(0), int(torch.cuda.get_device_properties(0).total_memory))


def cuda_device(name: str, total: int) -> Device:
    """A CUDA card as torch reports it (name, total memory), with the table's bf16 peak."""
    peak = next((KNOWN_DEVICES[key].bf16_tflops for hint, key in _NAME_HINTS if hint in name), None)
    return Device(name, total, peak)
