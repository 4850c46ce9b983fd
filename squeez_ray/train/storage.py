"""Where a multi-node run keeps its checkpoints: storage every node reads and writes, never a node-local folder.

Ray Train uploads each worker's checkpoint to ``run.storage_path`` and reads it back after a restart,
possibly on another node. A URI (``s3://``, ``gs://``: pyarrow file systems, which Ray Train and Ray
Data take directly) or a network file system mounted at the same path on every node
(``cluster.yaml`` mounts one at /mnt/shared) qualifies; a relative path (the job's temporary working
directory when submitted) or a folder on the head node's own disk does not.
"""

from __future__ import annotations

import os
from pathlib import Path

# /proc/mounts types that are the same storage seen from every node
SHARED_FS_TYPES = ("nfs", "nfs4", "efs", "lustre", "cifs", "smb3", "gpfs", "beegfs", "glusterfs", "ceph",
                   "fuse.s3fs", "fuse.gcsfuse", "fuse.mountpoint-s3", "fuse.juicefs", "fuse.sshfs", "virtiofs")


def is_uri(path: str) -> bool:
    return "://" in path


def cluster_address_set() -> bool:
    """RAY_ADDRESS names a cluster (a submitted job's driver has it; ``local`` / unset: an embedded Ray)."""
    address = os.environ.get("RAY_ADDRESS", "").strip()
    return bool(address) and address != "local"


def relative_storage_problem(storage_path: str, *, spread_workers: bool) -> str | None:
    """The offline rule (config validation): a relative path cannot be shared."""
    if is_uri(storage_path) or Path(storage_path).is_absolute():
        return None
    if spread_workers or cluster_address_set():
        why = "workers spread over nodes" if spread_workers else "RAY_ADDRESS names a cluster"
        return (f"storage_path: {storage_path!r} is relative, so node-local ({why}); use the shared mount "
                f"(/mnt/shared/runs on cluster.yaml) or an object-store URI (s3://bucket/runs)")
    return None


def filesystem_type(path: str, mounts_file: str = "/proc/mounts") -> str | None:
    """The file system type of the longest mount point above ``path``, from /proc/mounts."""
    try:
        lines = Path(mounts_file).read_text().splitlines()
    except OSError:
        return None
    target = Path(path).resolve()  # symlinks of the existing part followed; the rest need not exist yet
    best, best_type = "", None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        if (str(target) == point or str(target).startswith(point.rstrip("/") + "/")) and len(point) > len(best):
            best, best_type = point, fields[2]
    return best_type


def multinode_storage_problem(storage_path: str, nodes: int, mounts_file: str = "/proc/mounts") -> str | None:
    """At job start, once the cluster is joined: more than one node (machine) needs a URI or a network file system."""
    if nodes <= 1 or is_uri(storage_path):
        return None
    kind = filesystem_type(storage_path, mounts_file)
    if kind and (kind in SHARED_FS_TYPES or kind.startswith("nfs")):
        return None
    return (f"run.storage_path: {storage_path} is on a node-local file system ({kind or 'unknown'}) but the cluster "
            f"has {nodes} nodes: checkpoints written there are lost to workers on other nodes; use the shared "
            f"mount (/mnt/shared/runs on cluster.yaml) or an object-store URI (s3://bucket/runs)")
