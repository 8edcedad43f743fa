"""The SDK's frames against docs/asyncapi.json (generated from the broker's Go frame types), so
that the SDK cannot drift from the broker; and the result text format of SPEC 13."""

import dataclasses
import json
import types
import typing

import pytest

from conftest import ROOT

from backchannel import frames as fr
from backchannel import errors
from backchannel.agent import HEADER_NAMES, parse_result

ASYNCAPI = json.loads((ROOT / "docs" / "asyncapi.json").read_text())
SCHEMAS = ASYNCAPI["components"]["schemas"]
MESSAGES = ASYNCAPI["components"]["messages"]
ROLES = ("host", "agent")


def _ref(s: dict) -> str:
    return s["$ref"].rsplit("/", 1)[-1]


def channel_messages(role: str):
    """(direction, message) of every message of a role's channel: publish = client sends."""
    ch = ASYNCAPI["channels"][role]
    for op, direction in (("publish", "client"), ("subscribe", "broker")):
        for m in ch[op]["message"]["oneOf"]:
            yield direction, MESSAGES[_ref(m)]


def schema_of_message(m: dict) -> tuple[str, dict]:
    name = _ref(m["payload"])
    return name, SCHEMAS[name]


def frame_classes():
    return sorted(fr.FRAME_TYPES.values(), key=lambda c: c.TYPE)


def _unwrap_optional(tp):
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
        return typing.Union[tuple(args)]
    return tp


def check_type(where: str, tp, prop: dict) -> None:
    """The Python annotation tp matches the JSON Schema prop."""
    tp = _unwrap_optional(tp)
    if "$ref" in prop:
        target = SCHEMAS[_ref(prop)]
        if "enum" in target:
            assert typing.get_origin(tp) is typing.Literal, f"{where}: {tp} is not the enum {_ref(prop)}"
            assert sorted(typing.get_args(tp)) == sorted(target["enum"]), f"{where}: values differ from {_ref(prop)}"
        elif "oneOf" in target:  # Duration: integer milliseconds or a string
            assert set(typing.get_args(tp)) == {int, str}, f"{where}: {tp} is not int | str"
        else:
            assert dataclasses.is_dataclass(tp) and tp.__name__ == _ref(prop), f"{where}: {tp} is not {_ref(prop)}"
            check_fields(tp, target, _ref(prop))
        return
    t = prop.get("type")
    if t is None:  # any JSON value
        assert tp is typing.Any, f"{where}: {tp} should be any JSON value"
    elif t == "string":
        assert tp is str, f"{where}: {tp} is not str"
    elif t == "integer":
        assert tp is int, f"{where}: {tp} is not int"
    elif t == "boolean":
        assert tp is bool, f"{where}: {tp} is not bool"
    elif t == "object":
        assert typing.get_origin(tp) is dict, f"{where}: {tp} is not a dict"
    elif t == "array":
        assert typing.get_origin(tp) is list, f"{where}: {tp} is not a list"
        check_type(where + "[]", typing.get_args(tp)[0], prop["items"])
    else:
        raise AssertionError(f"{where}: schema type {t} not handled")


def check_fields(cls, schema: dict, name: str) -> None:
    """cls has exactly the schema's properties (type aside), with the same required-ness."""
    props = dict(schema["properties"])
    required = set(schema.get("required", []))
    if "type" in props:
        assert props.pop("type").get("const") == cls.TYPE, f"{name}: type const differs from {cls.TYPE}"
        assert "type" in required
        required.discard("type")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    assert set(fields) == set(props), f"{cls.__name__} vs {name}: only in SDK {set(fields) - set(props)}, only in asyncapi {set(props) - set(fields)}"
    hints = typing.get_type_hints(cls)
    for fname, f in fields.items():
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        assert has_default == (fname not in required), f"{cls.__name__}.{fname}: required-ness differs from {name}"
        if has_default:
            assert f.default is None, f"{cls.__name__}.{fname}: an optional member defaults to None"
        check_type(f"{cls.__name__}.{fname}", hints[fname], props[fname])


def test_every_modelled_frame_matches_asyncapi():
    by_type: dict[str, tuple[dict, set, set]] = {}
    for role in ROLES:
        for direction, m in channel_messages(role):
            sname, schema = schema_of_message(m)
            t = schema["properties"]["type"]["const"]
            entry = by_type.setdefault(t, (schema, set(), set()))
            entry[1].add(role)
            entry[2].add(direction)
    assert len(fr.FRAME_TYPES) == len(by_type), "the SDK models a frame no host or agent channel has, or misses one"
    for cls in frame_classes():
        assert cls.TYPE in by_type, f"{cls.__name__} ({cls.TYPE}) is in no host or agent channel of asyncapi"
        schema, roles, directions = by_type[cls.TYPE]
        assert set(cls.ROLES) == roles, f"{cls.TYPE}: roles {cls.ROLES} vs asyncapi {roles}"
        assert directions == {cls.DIRECTION}, f"{cls.TYPE}: direction {cls.DIRECTION} vs asyncapi {directions}"
        check_fields(cls, schema, cls.__name__)


def test_every_host_and_agent_frame_is_modelled():
    for role in ROLES:
        for direction, m in channel_messages(role):
            _, schema = schema_of_message(m)
            t = schema["properties"]["type"]["const"]
            assert t in fr.FRAME_TYPES, f"asyncapi's {role} frame {t} has no class in backchannel.frames"
            assert m.get("x-direction") == direction


def test_error_codes_are_exceptions():
    codes = SCHEMAS["Code"]["enum"]
    assert sorted(errors.ERRORS_BY_CODE) == sorted(codes)
    for code in codes:
        e = errors.broker_error(fr.Error(code=code, message="m", retryable=code == "internal"))
        assert type(e) is errors.ERRORS_BY_CODE[code] and e.code == code and e.retryable == (code == "internal")
        assert type(e).__name__ == "".join(p.capitalize() for p in code.split("_")) + "Error"
    assert sorted(typing.get_args(fr.DeferAckReason)) == sorted(SCHEMAS["DeferAckReason"]["enum"])


def test_asyncapi_examples_round_trip():
    """Every example frame of the host and agent channels decodes into its class and encodes
    back to the same JSON."""
    n = 0
    for role in ROLES:
        for direction, m in channel_messages(role):
            for ex in m.get("examples", []):
                payload = ex["payload"]
                f = fr.decode(json.dumps(payload))
                assert type(f).TYPE == payload["type"]
                assert json.loads(fr.encode(f)) == payload, f"{payload['type']} does not round-trip"
                n += 1
    assert n >= len(fr.FRAME_TYPES)


def test_decode_rejects_bad_frames():
    with pytest.raises(errors.FrameError, match="missing required field call_id"):
        fr.decode('{"type":"tool_cancel","reason":"timeout","seq":3}')
    with pytest.raises(errors.FrameError, match="must be an integer"):
        fr.decode('{"type":"tool_cancel","call_id":"x","reason":"timeout","seq":"3"}')
    with pytest.raises(errors.FrameError, match="unknown frame type") as e:
        fr.decode('{"type":"from_the_future","seq":9}')
    assert e.value.raw == {"type": "from_the_future", "seq": 9}
    f = fr.decode('{"type":"tool_cancel","call_id":"x","reason":"timeout","seq":3,"new_member":1}')
    assert f == fr.ToolCancel(call_id="x", reason="timeout", seq=3)
    assert fr.is_broker_call_id("call_abcdefghij234567abcd") and not fr.is_broker_call_id("call_abc")


def test_result_text_format():
    r = parse_result(fr.AgentToolResult(call_id="w", kind="result",
                                        content="original_tool_call_id: a\\nb\nduration_seconds: 7\n\nline 1\n\nline 3"))
    assert r.headers == {"original_tool_call_id": "a\nb", "duration_seconds": "7"}
    assert r.body == "line 1\n\nline 3" and r.duration_seconds == 7 and r.original_tool_call_id == "a\nb"
    r = parse_result(fr.AgentToolResult(call_id="w", kind="result",
                                        content="internal: true\nwait_outcome: interrupted\nwait_reason: activating_input\nwait_mode: exact"))
    assert r.interrupted and r.body is None and r.headers["wait_mode"] == "exact"
    r = parse_result(fr.AgentToolResult(call_id="w", kind="result", content='{"a": 1}'))
    assert r.headers == {} and r.json() == {"a": 1}
    r = parse_result(fr.AgentToolResult(call_id="w", kind="result", content="advice: not a header at the top"))
    assert r.headers == {"advice": "not a header at the top"}
    r = parse_result(fr.AgentToolResult(call_id="w", kind="result", content="Note: free text"))
    assert r.headers == {} and r.body == "Note: free text"
    r = parse_result(fr.AgentToolResult(call_id="c", kind="error", content="error: Unknown tool call id\ntool_call_id: x\\u2028y\\x07"))
    assert r.is_error and r.error == "Unknown tool call id" and r.headers["tool_call_id"] == "x\u2028y\x07"
    assert HEADER_NAMES[0] == "internal" and HEADER_NAMES[-1] == "pending_prompts"
