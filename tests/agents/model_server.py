#!/usr/bin/env python3
"""A scripted fake model endpoint that drives real coding agents.

    model_server.py --listen 127.0.0.2:8080 --script FILE.json [--script FILE.json ...]
                    --record FILE.jsonl [--var NAME=VALUE ...]
    model_server.py --results FILE.jsonl [--detail]

Serve mode prints `listening on HOST:PORT` (flushed) once the socket listens,
then answers until killed. Python 3 standard library only.

Endpoints
  POST /v1/messages[?beta=true]       Anthropic Messages API (Claude Code,
                                      opencode's anthropic provider): SSE with
                                      `event:` lines, tool input only through
                                      `input_json_delta`; JSON when the request
                                      says `"stream": false`.
  POST /v1/messages/count_tokens      {"input_tokens": N}
  POST /v1/responses                  OpenAI Responses API, handled by
                                      openai_responses.py (imported lazily).
  GET /v1/models[...]                 a one-model list
  HEAD/GET/POST anything else         200 with `{}`

The OpenAI Responses plug-in (tests/agents/openai_responses.py) provides

    handle(body: dict, script: Script, sse: Callable[[str, dict], None]) -> None

  for a streaming request: the core has already sent `200` and the
  `text/event-stream` headers; `sse(event, data)` writes
  `event: <event>\\ndata: <json>\\n\\n` and flushes. When the request says
  `"stream": false` the core calls instead, if the module defines it,

    handle_json(body: dict, script: Script) -> dict

  and sends the dict as the JSON reply. The plug-in picks the step with
  `script.select(tool_names, n_results)` (below) and names its call ids with
  `script.call_id(step_index)` so that `--results` can map outputs to steps.

Script JSON
  {"steps": [{"tool": "Bash", "input": {"command": "echo hi"}},
             {"tool": "apply_patch", "raw": "*** Begin Patch\\n..."}, ...],
   "final": "done", "side_text": "ok"}
  Every string anywhere in the script gets `{NAME}` replaced by the value of
  `--var NAME=VALUE` (names not given are left alone).

Step selection (stateless)
  For a main-conversation request, the next step is steps[n] where n is the
  number of tool results already in that request's conversation; when
  n == len(steps) the reply is the `final` text with stop reason end_turn.
  Nothing is remembered between requests, so retries and replays get the
  same answer.

Side requests
  Agents make extra model calls besides the conversation: title generation,
  topic/summary detection, a max_tokens=1 quota probe, prompt suggestions,
  token counting. A request is the main conversation iff its `tools` offer
  every tool name the script uses (Script.is_main): stateless, and a
  subagent or side call offering fewer tools can't consume a step. Seen so
  far: opencode's title request (system prompt "You are a title
  generator...", no tools) before the first turn; Claude Code in `-p` mode
  with CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC makes none (without it, a
  `HEAD /api/hello` probe). Side calls get a short plain text ("ok", or the
  script's "side_text") and consume no step. The record marks each request
  `"kind": "main"` or `"side"` (null for probes such as HEAD /).

Record
  One JSON line per request: {"time", "method", "path", "headers", "body",
  "kind", "step"} (body parsed as JSON when it is JSON, else text; "step" is
  the index of the step answered, len(steps) for the final answer, null for
  side requests). Tool call ids carry their step ("toolu_confine_<i>_<hex>",
  "call_confine_<i>_<hex>").

  `model_server.py --results FILE.jsonl` prints a JSON array: element i is
  the tool result (a string) of step i, taken from the LAST main-conversation
  request (which carries the whole conversation); null where it is missing.
  The array is shorter than the script when the agent stopped early.
  `--detail` prints objects {step, tool_use_id, content, is_error} instead
  (is_error: Anthropic's flag, e.g. Claude Code's Read of an unreadable
  file; always false for the Responses API).
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import re
import socketserver
import sys
import threading
import time
import uuid
from typing import Any, Callable, Iterable, Optional

ID_PREFIX = "confine"  # tool call ids are "toolu_confine_<step>_<rand>" etc.


# --------------------------------------------------------------------------
# Script


def _subst(value: Any, variables: dict[str, str]) -> Any:
    if isinstance(value, str):
        for name, val in variables.items():
            value = value.replace("{" + name + "}", val)
        return value
    if isinstance(value, list):
        return [_subst(v, variables) for v in value]
    if isinstance(value, dict):
        return {k: _subst(v, variables) for k, v in value.items()}
    return value


class Script:
    """The scenario: a list of tool calls, then a final text."""

    def __init__(self, data: dict, variables: dict[str, str]):
        data = _subst(data, variables)
        self.steps: list[dict] = list(data.get("steps", []))
        self.final: str = data.get("final", "done")
        self.side_text: str = data.get("side_text", "ok")
        for i, s in enumerate(self.steps):
            if "tool" not in s:
                raise ValueError(f"step {i} has no 'tool'")
        self.tool_names: set[str] = {s["tool"] for s in self.steps}

    @classmethod
    def load(cls, path: str, variables: dict[str, str]) -> "Script":
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f), variables)

    def is_main(self, offered_tools: Iterable[str]) -> bool:
        """A request is the main conversation iff it offers every script tool."""
        return self.tool_names <= set(offered_tools)

    def select(self, offered_tools: Iterable[str], n_results: int):
        """("side", None) | ("step", i) | ("final", len(steps))."""
        if not self.is_main(offered_tools):
            return ("side", None)
        if n_results < len(self.steps):
            return ("step", n_results)
        return ("final", len(self.steps))

    @staticmethod
    def call_id(step: int, prefix: str = "toolu") -> str:
        return f"{prefix}_{ID_PREFIX}_{step}_{uuid.uuid4().hex[:12]}"

    @staticmethod
    def step_of_id(call_id: str) -> Optional[int]:
        m = re.search(rf"_{ID_PREFIX}_(\d+)_", call_id or "")
        return int(m.group(1)) if m else None


# --------------------------------------------------------------------------
# Anthropic Messages API


def _anthropic_tool_names(body: dict) -> list[str]:
    return [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]


def _anthropic_tool_results(body: dict) -> list[dict]:
    """tool_result blocks of the conversation, in order."""
    out = []
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                c = block.get("content")
                if isinstance(c, list):
                    c = "".join(
                        b.get("text", "") if isinstance(b, dict) else str(b) for b in c
                    )
                elif c is None:
                    c = ""
                out.append(
                    {
                        "tool_use_id": block.get("tool_use_id", ""),
                        "content": c,
                        "is_error": bool(block.get("is_error", False)),
                    }
                )
    return out


def anthropic_reply(body: dict, script: Script):
    """-> (kind, step, content blocks, stop_reason)."""
    n = len(_anthropic_tool_results(body))
    kind, step = script.select(_anthropic_tool_names(body), n)
    if kind == "side":
        return kind, None, [{"type": "text", "text": script.side_text}], "end_turn"
    if kind == "final":
        return kind, step, [{"type": "text", "text": script.final}], "end_turn"
    s = script.steps[step]
    block = {
        "type": "tool_use",
        "id": Script.call_id(step),
        "name": s["tool"],
        "input": s.get("input", {}),
    }
    return kind, step, [block], "tool_use"


def anthropic_stream(body: dict, blocks: list[dict], stop_reason: str,
                     sse: Callable[[str, dict], None]) -> None:
    model = body.get("model", "fake-model")
    usage = {"input_tokens": 10, "output_tokens": 0,
             "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    sse("message_start", {
        "type": "message_start",
        "message": {"id": "msg_" + uuid.uuid4().hex, "type": "message",
                    "role": "assistant", "model": model, "content": [],
                    "stop_reason": None, "stop_sequence": None, "usage": usage},
    })
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            sse("content_block_start", {"type": "content_block_start", "index": i,
                                        "content_block": {"type": "text", "text": ""}})
            sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                        "delta": {"type": "text_delta", "text": b["text"]}})
        else:  # tool_use: input only through input_json_delta
            sse("content_block_start", {"type": "content_block_start", "index": i,
                                        "content_block": {"type": "tool_use", "id": b["id"],
                                                          "name": b["name"], "input": {}}})
            js = json.dumps(b["input"])
            for k in range(0, len(js), 64):
                sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                            "delta": {"type": "input_json_delta",
                                                      "partial_json": js[k:k + 64]}})
        sse("content_block_stop", {"type": "content_block_stop", "index": i})
    sse("message_delta", {"type": "message_delta",
                          "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                          "usage": {"output_tokens": 5}})
    sse("message_stop", {"type": "message_stop"})


def anthropic_json(body: dict, blocks: list[dict], stop_reason: str) -> dict:
    return {"id": "msg_" + uuid.uuid4().hex, "type": "message", "role": "assistant",
            "model": body.get("model", "fake-model"), "content": blocks,
            "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


# --------------------------------------------------------------------------
# OpenAI Responses: tool results, for --results


def _openai_text(output: Any) -> str:
    """A Responses tool output: a string, a list of content items, or an
    object wrapping either."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "".join(_openai_text(x.get("text") or x.get("output") or "")
                       if isinstance(x, dict) else str(x) for x in output)
    if isinstance(output, dict):
        for key in ("content", "text", "output"):
            if key in output:
                return _openai_text(output[key])
    return json.dumps(output)


def _openai_tool_results(body: dict) -> list[dict]:
    items = body.get("input")
    if not isinstance(items, list):  # a bare prompt string is legal
        return []
    return [{"tool_use_id": it.get("call_id", ""), "content": _openai_text(it.get("output")),
             "is_error": False}
            for it in items
            if isinstance(it, dict) and it.get("type") in (
                "function_call_output", "custom_tool_call_output", "local_shell_call_output")]


def _openai_tool_names(body: dict) -> list[str]:
    names = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            fn = t.get("function")
            names.append(t.get("name") or (fn.get("name", "") if isinstance(fn, dict) else ""))
    return names


def _openai_module():
    """openai_responses.py beside this file, imported on first use."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import openai_responses  # noqa: E402  (the other dialect; may be absent)
    return openai_responses


# --------------------------------------------------------------------------
# HTTP


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, scripts: list[Script], record_path: str):
        super().__init__(addr, Handler)
        self.scripts = scripts
        self.record_lock = threading.Lock()
        self.record_file = open(record_path, "a", encoding="utf-8")

    def script_for(self, body, path: str) -> Script:
        """The script whose tools the request offers: several agents, each
        with its own tool names, can share one server. Side requests offer
        none of them and get the first script's side answer."""
        if isinstance(body, dict):
            offered = _openai_tool_names(body) if path == "/v1/responses" else _anthropic_tool_names(body)
            for script in self.scripts:
                if script.is_main(offered):
                    return script
        return self.scripts[0]

    def record(self, entry: dict) -> None:
        with self.record_lock:
            self.record_file.write(json.dumps(entry) + "\n")
            self.record_file.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, fmt, *args):  # keep stdout to the one "listening" line
        sys.stderr.write("model_server: %s %s\n" % (self.address_string(), fmt % args))

    # -- plumbing
    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _start_sse(self) -> Callable[[str, dict], None]:
        # No length, no chunking: the stream ends when the connection closes.
        # That is valid for HTTP/1.0 and 1.1 alike, and so passes any proxy.
        self._sse_started = True
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

        def sse(event: str, data: dict) -> None:
            self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

        return sse

    def _record(self, body: Any, kind: Optional[str] = None, step: Optional[int] = None):
        self.server.record({
            "time": time.time(), "method": self.command, "path": self.path,
            "headers": dict(self.headers.items()), "body": body,
            "kind": kind, "step": step,
        })

    # -- verbs
    def do_HEAD(self):
        self._record(None)
        self._json({})

    def do_GET(self):
        self._record(None)
        path = self.path.split("?")[0]
        if path.startswith("/v1/models"):
            m = {"id": "claude-sonnet-4-5", "type": "model", "display_name": "fake",
                 "created_at": "2025-01-01T00:00:00Z", "object": "model",
                 "created": 1735689600, "owned_by": "confine"}
            if path == "/v1/models":
                self._json({"data": [m], "object": "list", "has_more": False,
                            "first_id": m["id"], "last_id": m["id"]})
            else:
                self._json(m)
            return
        self._json({})

    def do_POST(self):
        self._sse_started = False
        try:
            self._post()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the agent hung up; nothing to answer
        except Exception as e:  # a bug or a malformed request: say so, don't hang
            import traceback
            traceback.print_exc(file=sys.stderr)
            if not self._sse_started:
                self._json({"type": "error", "error": {"type": "api_error",
                                                       "message": f"model_server: {e!r}"}}, 500)
            self.close_connection = True

    def _post(self):
        raw = self._read_body()
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = raw.decode("utf-8", "replace")
        path = self.path.split("?")[0].rstrip("/")
        script = self.server.script_for(body, path)

        if path == "/v1/messages" and isinstance(body, dict):
            kind, step, blocks, stop = anthropic_reply(body, script)
            self._record(body, "side" if kind == "side" else "main", step)
            if body.get("stream"):
                anthropic_stream(body, blocks, stop, self._start_sse())
            else:
                self._json(anthropic_json(body, blocks, stop))
            return
        if path == "/v1/messages/count_tokens":
            self._record(body, "side")
            self._json({"input_tokens": 100})
            return
        if path == "/v1/responses" and isinstance(body, dict):
            openai_responses = _openai_module()
            kind, step = script.select(_openai_tool_names(body),
                                       len(_openai_tool_results(body)))
            self._record(body, "side" if kind == "side" else "main", step)
            if body.get("stream", False) or not hasattr(openai_responses, "handle_json"):
                openai_responses.handle(body, script, self._start_sse())
            else:
                self._json(openai_responses.handle_json(body, script))
            return
        self._record(body)
        self._json({})

    do_PUT = do_POST
    do_PATCH = do_POST

    def do_DELETE(self):
        self._record(None)
        self._json({})

    def do_OPTIONS(self):
        self._record(None)
        self._json({})


# --------------------------------------------------------------------------
# --results


def tool_results(record_path: str) -> list[dict]:
    """Tool results by step, from the last main-conversation request."""
    last = None
    with open(record_path, encoding="utf-8") as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue  # a line being written right now
            if e.get("kind") == "main":
                last = e
    if last is None:
        return []
    body = last["body"]
    if last["path"].split("?")[0].rstrip("/") == "/v1/responses":
        found = _openai_tool_results(body)
    else:
        found = _anthropic_tool_results(body)
    n_steps = last["step"] if last.get("step") is not None else len(found)
    by_step: list[Optional[dict]] = [None] * max(n_steps, len(found))
    unmapped = []
    for r in found:
        i = Script.step_of_id(r["tool_use_id"])
        if i is not None and i < len(by_step) and by_step[i] is None:
            by_step[i] = dict(r, step=i)
        else:
            unmapped.append(r)
    for r in unmapped:  # ids the agent rewrote: fill the gaps in order
        i = by_step.index(None)
        by_step[i] = dict(r, step=i)
    return by_step  # type: ignore[return-value]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", default="127.0.0.2:8080")
    ap.add_argument("--script", action="append", default=[],
                    help="repeatable: each request is answered from the script whose tools it offers")
    ap.add_argument("--record")
    ap.add_argument("--var", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--results", metavar="RECORD.jsonl",
                    help="print the tool results of the last main request, by step")
    ap.add_argument("--detail", action="store_true",
                    help="with --results: objects {step, tool_use_id, content, is_error}")
    a = ap.parse_args()

    if a.results:
        rs = tool_results(a.results)
        if a.detail:
            print(json.dumps(rs, indent=1))
        else:
            print(json.dumps([r["content"] if r else None for r in rs]))
        return 0

    if not a.script or not a.record:
        ap.error("--script and --record are required to serve")
    variables = {}
    for v in a.var:
        name, sep, value = v.partition("=")
        if not sep:
            ap.error(f"--var {v}: expected NAME=VALUE")
        variables[name] = value
    scripts = [Script.load(path, variables) for path in a.script]
    host, _, port = a.listen.rpartition(":")
    srv = Server((host.strip("[]"), int(port)), scripts, a.record)
    print(f"listening on {host}:{srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
