"""A PEP 517 build backend with no build requirements, for `pip install ./sdk/python`.

The package is pure Python, so a wheel is a zip of src/backchannel with the metadata of
pyproject.toml. Needing no setuptools, the install works where no Python package index can be
reached (pip's build isolation would otherwise have to download one): the SDK's only
dependency, websockets, is then the one thing to provide (Debian: python3-websockets).
"""

import base64
import hashlib
import io
import os
import pathlib
import tarfile
import time
import tomllib
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "backchannel"


def _project() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)["project"]


def _metadata() -> str:
    p = _project()
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p['description']}", f"Requires-Python: {p['requires-python']}"]
    if "license" in p:
        lines.append(f"License: {p['license'].get('text', '')}")
    for a in p.get("authors", []):
        lines.append(f"Author: {a['name']}")
    for url_name, url in p.get("urls", {}).items():
        lines.append(f"Project-URL: {url_name}, {url}")
    for c in p.get("classifiers", []):
        lines.append(f"Classifier: {c}")
    for d in p.get("dependencies", []):
        lines.append(f"Requires-Dist: {d}")
    lines.append("Description-Content-Type: text/markdown")
    readme = (ROOT / p.get("readme", "README.md")).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + readme


def _dist_info() -> str:
    p = _project()
    return f"{p['name']}-{p['version']}.dist-info"


def _wheel_name() -> str:
    p = _project()
    return f"{p['name']}-{p['version']}-py3-none-any.whl"


_WHEEL = "Wheel-Version: 1.0\nGenerator: backchannel _build/backend.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _package_files() -> list[tuple[str, bytes]]:
    src = ROOT / "src" / PACKAGE
    out = []
    for path in sorted(src.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".typed"):
            out.append((str(path.relative_to(ROOT / "src")).replace(os.sep, "/"), path.read_bytes()))
    return out


def _write_wheel(wheel_directory: str, files: list[tuple[str, bytes]]) -> str:
    info = _dist_info()
    files = files + [(f"{info}/METADATA", _metadata().encode()), (f"{info}/WHEEL", _WHEEL.encode())]
    record = []
    name = _wheel_name()
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arcname, data in files:
            zi = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            record.append(f"{arcname},sha256={digest},{len(data)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)), "\n".join(record) + "\n")
    return name


# PEP 517 hooks.

def get_requires_for_build_wheel(config_settings=None):  # type: ignore[no-untyped-def]
    return []


def get_requires_for_build_sdist(config_settings=None):  # type: ignore[no-untyped-def]
    return []


def get_requires_for_build_editable(config_settings=None):  # type: ignore[no-untyped-def]
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):  # type: ignore[no-untyped-def]
    d = pathlib.Path(metadata_directory) / _dist_info()
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text(_metadata(), encoding="utf-8")
    (d / "WHEEL").write_text(_WHEEL, encoding="utf-8")
    return d.name


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):  # type: ignore[no-untyped-def]
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):  # type: ignore[no-untyped-def]
    pth = (str(ROOT / "src") + "\n").encode()
    return _write_wheel(wheel_directory, [(f"_{PACKAGE}_editable.pth", pth)])


def build_sdist(sdist_directory, config_settings=None):  # type: ignore[no-untyped-def]
    p = _project()
    base = f"{p['name']}-{p['version']}"
    name = f"{base}.tar.gz"
    members = ["pyproject.toml", "README.md", "_build/backend.py"] + [f"src/{a}" for a, _ in _package_files()]
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for m in members:
            data = (ROOT / m).read_bytes()
            ti = tarfile.TarInfo(f"{base}/{m}")
            ti.size, ti.mtime, ti.mode = len(data), int(time.time()), 0o644
            t.addfile(ti, io.BytesIO(data))
        pkg_info = _metadata().encode()
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size, ti.mtime, ti.mode = len(pkg_info), int(time.time()), 0o644
        t.addfile(ti, io.BytesIO(pkg_info))
    return name
