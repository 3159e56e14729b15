"""One container's process: its image's root, the pod's volumes, its user, then its command.

Run by the lab's kubelet as root, already inside the pod's network namespace and a mount
namespace of its own (`nsenter --net=... unshare --mount --propagation private`), so every
mount here vanishes with the process. Standard library only. The root is a tmpfs holding
the image's files (images.py); an image built on a distribution sees the host's /usr, /etc
and /lib through overlays whose writes land in the container's own folder.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HOST_DIRECTORIES = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "opt")
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
PASSWD = "root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n"
PASSWD += "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
GROUP = "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def _bind(source: str, target: Path, *, read_only: bool) -> None:
    if Path(source).is_dir():
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.touch()
    _mount("--rbind", source, str(target))
    if read_only:
        _mount("-o", "remount,bind,ro", str(target))


def _inside(root: Path, path: str) -> Path:
    return root / path.lstrip("/")


def prepare_root(spec: dict[str, Any]) -> Path:
    root = Path(spec["root"])
    scratch = Path(spec["scratch"])
    root.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(root))
    if spec["base"] == "host":
        for name in HOST_DIRECTORIES:
            host = Path("/") / name
            if host.is_symlink():
                (root / name).symlink_to(os.readlink(host))
            elif host.is_dir():
                upper, work = scratch / "upper" / name, scratch / "work" / name
                upper.mkdir(parents=True, exist_ok=True)
                work.mkdir(parents=True, exist_ok=True)
                (root / name).mkdir()
                _mount(
                    "-t",
                    "overlay",
                    "overlay",
                    "-o",
                    f"lowerdir={host},upperdir={upper},workdir={work}",
                    str(root / name),
                )
    else:
        etc = root / "etc"
        etc.mkdir()
        (etc / "passwd").write_text(PASSWD)
        (etc / "group").write_text(GROUP)
        (etc / "nsswitch.conf").write_text("hosts: files dns\n")
    for path, source in spec["files"].items():
        target = _inside(root, path)
        if source["kind"] == "text":
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(source["value"])
            target.chmod(0o755)
        else:
            _bind(source["value"], target, read_only=True)
    (root / "proc").mkdir(exist_ok=True)
    _mount("--rbind", "/proc", str(root / "proc"))
    dev = root / "dev"
    dev.mkdir(exist_ok=True)
    _mount("-t", "tmpfs", "-o", "mode=0755", "tmpfs", str(dev))
    for device in DEVICES:
        _bind(f"/dev/{device}", dev / device, read_only=False)
    (dev / "shm").mkdir()
    _mount("-t", "tmpfs", "-o", "mode=1777", "tmpfs", str(dev / "shm"))
    for name in ("tmp", "run", "var/tmp"):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o1777)
    for name in ("hosts", "resolv.conf"):
        _bind(spec[name], root / "etc" / name, read_only=True)
    for mount in spec["mounts"]:
        _bind(mount["source"], _inside(root, mount["target"]), read_only=mount["readOnly"])
    return root


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    root = prepare_root(spec)
    os.chroot(root)
    os.chdir(spec.get("workingDir") or "/")
    user, group = spec.get("user"), spec.get("group")
    if group is not None or user is not None:
        os.setgroups([int(g) for g in spec.get("supplementalGroups", [])])
        os.setgid(int(group if group is not None else user))
    if user is not None:
        os.setuid(int(user))
    environment = dict(spec["env"])
    argv = spec["argv"]
    try:
        os.execvpe(argv[0], argv, environment)
    except OSError as error:
        print(f"lab: cannot run {argv[0]} in this image: {error}", file=sys.stderr)
        sys.exit(127)


if __name__ == "__main__":
    main()
