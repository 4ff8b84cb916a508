"""`scalerl import` keeps a run's description (users comparing with W&B/MLflow lost it): an MLflow run's params become
its config (as the values they were: 1e-6 a number, True a boolean), its own tags its tags, its note its notes; a
wandb offline run's config (nested keys dotted, the config changed after init included), tags and notes. Sources
that record none take --config/--tag. The REST filters then find the imported runs by them."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from scalerl.cli.main import cli
from scalerl.client import Client
from scalerl.integrations.readers import RunHistory, description_of, param_value, read_any, service_description
from tests.client.conftest import Service

FIXTURE = Path(__file__).parents[1] / "fixtures" / "wandb_offline"
RUN_DIR = next(FIXTURE.glob("offline-run-*"))


def _import(service: Service, *args: str) -> Any:
    return CliRunner().invoke(cli, ["import", *args, "--url", service.url, "--token", service.token])


def _runs(service: Service, query: str) -> list[dict[str, Any]]:
    with Client(service.url, service.token) as api:
        rows: list[dict[str, Any]] = api.request("GET", f"/api/v1/runs?{query}")
    return rows


# ---- a wandb run log written here: the fields wandb writes, encoded as protobuf records ---------------------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _field(number: int, value: bytes | str | int) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _config_item(path: list[str], value: Any) -> bytes:
    key = _field(1, path[0]) if len(path) == 1 else b"".join(_field(2, p) for p in path)
    return key + _field(16, json.dumps(value))


def _wandb_log(path: Path, records: list[bytes]) -> None:
    """A run log: the ':W&B' header, then each record whole (type 1) in one block."""
    data = bytearray(b":W&B" + struct.pack("<H", 0xBEE1) + b"\x00")
    for rec in records:
        crc = zlib.crc32(rec, zlib.crc32(bytes([1]))) & 0xFFFFFFFF
        data += struct.pack("<IHB", crc, len(rec), 1) + rec
    assert len(data) < 32768
    path.write_bytes(bytes(data))


def _history(step: int, values: dict[str, float]) -> bytes:
    items = b"".join(_field(1, _field(1, k) + _field(16, json.dumps(v))) for k, v in values.items())
    return _field(2, items + _field(2, _field(1, step)))


def _described_wandb_run(path: Path) -> None:
    config = b"".join(
        _field(1, _config_item(p, v))
        for p, v in (
            (["_wandb"], {"cli_version": "0.31.0"}),
            (["lr"], 1e-6),
            (["optimizer"], {"name": "adamw", "betas": [0.9, 0.99]}),
            (["loss"], {"desc": None, "value": "cispo"}),  # older wandb's wrapped value
            (["batch"], 64),
        )
    )
    run = _field(1, "abc123") + _field(4, config) + _field(8, "grpo-described") + _field(9, "batch 64, lr sweep")
    run += _field(10, "sweep") + _field(10, "baseline")
    later = _field(1, _config_item(["optimizer", "eps"], 1e-8)) + _field(1, _config_item(["use_kl"], False))
    later += _field(2, _config_item(["batch"], None))  # removed after init
    records = [_field(17, run), _field(5, later)]
    records += [_history(s, {"eval/accuracy": 0.1 + 0.01 * s, "train/global_step": float(s)}) for s in range(1, 9)]
    _wandb_log(path, records)


def test_wandb_offline_runs_keep_their_config_tags_and_notes(tmp_path: Path) -> None:
    ((name, history),) = read_any(RUN_DIR).items()
    assert isinstance(history, RunHistory) and history.config["lr"] == 1e-6  # the fixture's wandb.init(config=...)
    assert description_of(history).config == {"lr": 1e-6}  # wandb's own _wandb key left out
    log = tmp_path / "offline-run-x" / "run-abc123.wandb"
    log.parent.mkdir()
    _described_wandb_run(log)
    ((name, history),) = read_any(log.parent).items()
    assert name == "grpo-described" and len(history) == 8
    described = description_of(history)
    assert described.config == {
        "lr": 1e-6,
        "optimizer.name": "adamw",
        "optimizer.betas": "[0.9, 0.99]",
        "optimizer.eps": 1e-8,
        "loss": "cispo",
        "use_kl": False,
    }
    assert described.tags == ["sweep", "baseline"] and described.notes == "batch 64, lr sweep"


def test_mlflow_params_and_tags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _mlflow_store(tmp_path, monkeypatch)
    runs = read_any(store)
    described = description_of(runs["lr=1e-6"])
    assert described.config == {"lr": 1e-6, "batch": 64, "use_kl": True, "loss": "cispo", "note": "n/a"}
    assert described.tags == ["baseline", "team=rl"] and described.notes == "the first try"
    assert [param_value(t) for t in ("1e-3", "32", "False", "nan", "1_000", "9" * 30)] == [
        1e-3, 32, False, "nan", "1_000", "9" * 30,
    ]  # fmt: skip


def _mlflow_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlruns"
    client = MlflowClient(tracking_uri=store.resolve().as_uri())
    exp = client.create_experiment("grpo-sweep")
    for lr, tagged in (("1e-6", True), ("3e-6", False)):
        run = client.create_run(exp, run_name=f"lr={lr}")
        rid = run.info.run_id
        for key, value in (("lr", lr), ("batch", 64), ("use_kl", True), ("loss", "cispo"), ("note", "n/a")):
            client.log_param(rid, key, value)
        if tagged:
            client.set_tag(rid, "team", "rl")
            client.set_tag(rid, "baseline", "")
            client.set_tag(rid, "mlflow.note.content", "the first try")
        for step in range(6):
            client.log_metric(rid, "eval/accuracy", 0.1 + 0.05 * step, step=step)
        client.set_terminated(rid)
    return store


def test_import_keeps_mlflow_params_and_wandb_config_on_the_service(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _mlflow_store(tmp_path, monkeypatch)
    res = _import(service, str(store), "--experiment", "from-mlflow")
    assert res.exit_code == 0, res.output
    assert "lr=1e-6: config: 5 keys (batch, loss, lr, note, use_kl); tags: baseline, team=rl" in res.output
    (run,) = _runs(service, "config.lr=0.000001&tag=baseline")
    assert run["name"] == "lr=1e-6" and run["config"]["use_kl"] is True and run["notes"] == "the first try"
    assert [r["name"] for r in _runs(service, "config.batch=64&sort=-config.lr")] == ["lr=3e-6", "lr=1e-6"]
    again = _import(service, str(store), "--experiment", "from-mlflow")  # the same runs, the same description
    assert again.exit_code == 0 and "0 new points" in again.output, again.output
    assert len(_runs(service, "config.loss=cispo")) == 2

    log = tmp_path / "wandb" / "offline-run-x" / "run-abc123.wandb"
    log.parent.mkdir(parents=True)
    _described_wandb_run(log)
    res = _import(service, str(tmp_path / "wandb"), "--experiment", "from-wandb", "--tag", "imported")
    assert res.exit_code == 0, res.output
    (run,) = _runs(service, "config.optimizer.name=adamw&tag=sweep&tag=imported")
    assert run["name"] == "grpo-described" and run["config"]["optimizer.eps"] == 1e-8 and "batch" not in run["config"]
    res = _import(service, str(RUN_DIR), "--experiment", "from-wandb")
    assert res.exit_code == 0, res.output
    assert [r["name"] for r in _runs(service, "config.lr=1e-6")] == ["lr=1e-6", "grpo-described", "grpo-lr1e-6"]

    # `scalerl runs` shows them
    out = CliRunner().invoke(cli, ["runs", "--experiment", "from-wandb", "--columns", "config.lr,config.loss",
                                   "--url", service.url, "--token", service.token])  # fmt: skip
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert "grpo-described" in lines[0], out.output
    assert "tags=sweep,baseline,imported  config.lr=1e-06  config.loss=cispo" in lines[0], out.output
    assert "grpo-lr1e-6" in lines[1] and "config.lr=1e-06" in lines[1] and "config.loss=-" in lines[1], out.output


def test_sources_without_a_description_take_config_and_tag_options(service: Service, tmp_path: Path) -> None:
    export = tmp_path / "history.csv"
    export.write_text("Step,eval/accuracy\n" + "".join(f"{s},{0.1 + 0.01 * s}\n" for s in range(1, 9)))
    res = _import(service, str(export), "--config", "lr=1e-6", "--config", "loss=cispo", "--config", "kl=false",
                  "--config", "x=NaN", "--tag", "csv", "--tag", "bad tag!")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "left out tag 'bad tag!'" in res.output
    (run,) = _runs(service, "tag=csv")
    assert run["config"] == {"lr": 1e-6, "loss": "cispo", "kl": False, "x": "NaN"} and run["tags"] == ["csv"]
    res = _import(service, str(export), "--config", "lr")
    assert res.exit_code == 2 and "--config 'lr': write KEY=VALUE" in res.output and "Traceback" not in res.output
    res = _import(service, str(export), "--csv-out", str(tmp_path / "o"), "--tag", "csv")
    assert res.exit_code == 0 and "--csv-out writes the points only" in res.output, res.output


def test_service_description_fits_the_service_limits() -> None:
    config: dict[str, Any] = {f"k{i:03d}": i for i in range(205)}
    config.update({"none": None, "nan": float("nan"), "long": "x" * 501, "k" * 101: 1, "big": 2**70})
    d = service_description(config, ["a", "a", "-no", "x" * 65, *[f"t{i}" for i in range(55)]], "n" * 10_005)
    assert len(d.config) == 200 and "big" not in d.config and d.tags[:2] == ["a", "t0"] and len(d.tags) == 50
    assert len(d.notes) == 10_000
    dropped = "\n".join(d.dropped)
    for says in ("'none': no value", "'nan': not storable", "'long': not storable", "past 200 keys", "'-no'",
                 "past 50 tags"):  # fmt: skip
        assert says in dropped, dropped
    assert service_description({"big": 2**70}, []).config == {"big": str(2**70)}
