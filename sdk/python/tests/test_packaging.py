"""The package builds with its in-tree PEP 517 backend (no build requirements, so `pip install
./sdk/python` needs no package index): the wheel holds every module, py.typed and the metadata
of pyproject.toml, with websockets as the one dependency."""

import importlib.util
import tarfile
import tomllib
import zipfile

from conftest import SDK


def backend():
    spec = importlib.util.spec_from_file_location("bc_backend", SDK / "_build" / "backend.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_wheel_and_sdist(tmp_path):
    project = tomllib.loads((SDK / "pyproject.toml").read_text())
    assert project["build-system"]["requires"] == [] and project["project"]["dependencies"] == ["websockets>=10.4"]
    b = backend()
    assert b.get_requires_for_build_wheel() == []
    name = b.build_wheel(str(tmp_path))
    assert name == "backchannel-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as z:
        names = set(z.namelist())
        modules = {f"backchannel/{p.name}" for p in (SDK / "src" / "backchannel").iterdir() if p.suffix == ".py"}
        assert modules | {"backchannel/py.typed"} <= names
        assert not any("__pycache__" in n for n in names)
        meta = z.read("backchannel-0.1.0.dist-info/METADATA").decode()
        assert "Requires-Dist: websockets>=10.4" in meta and "Requires-Python: >=3.11" in meta
        record = z.read("backchannel-0.1.0.dist-info/RECORD").decode()
        assert "backchannel/client.py,sha256=" in record
    sdist = b.build_sdist(str(tmp_path))
    with tarfile.open(tmp_path / sdist) as t:
        assert "backchannel-0.1.0/_build/backend.py" in t.getnames()
        assert "backchannel-0.1.0/src/backchannel/py.typed" in t.getnames()
