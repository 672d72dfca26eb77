"""OpenAI Responses API (streaming) dialect of the scripted model server.

model_server.py routes POST /v1/responses here (Codex CLI's wire_api
"responses"):

    handle(body, script, sse)    answer one streaming request: sse(event, data)
                                 writes one SSE event; 200 and the
                                 text/event-stream headers are already sent
    handle_json(body, script)    the completed response object, for a request
                                 with "stream": false
    tool_results(body)           the tool outputs the request carries, in order

`script.steps` is a list of {"tool": NAME, "input": {...}} (a function call
whose arguments are the JSON of "input", e.g. Codex's exec_command) or
{"tool": NAME, "raw": TEXT} (a custom, freeform tool call, e.g. Codex's
apply_patch); `script.final` is the closing text. Selection is stateless: a
main-conversation request that already carries n tool outputs
(function_call_output / custom_tool_call_output items in its "input") gets
steps[n] as one function_call / custom_tool_call output item, and the final
assistant message once n == len(steps). A request that doesn't offer every
tool the script uses (a title, summary or compaction request offers none) is
a side request: it gets a short text and consumes no step. With the core's
Script the choice is script.select(...) and call ids are
script.call_id(step, "call"), so `--results` maps each output to its step.

The stream is what the Responses API sends and Codex reads: response.created
and response.in_progress; per output item response.output_item.added, the
text or argument deltas, response.output_item.done; then
response.completed carrying the output and a usage block. Codex acts on
output_item.done and needs response.completed (with an id) to end the turn.
"""

import json
import uuid

OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output",
                "local_shell_call_output")
SIDE_TEXT = "ok"


def _get(script, key, default=None):
    if isinstance(script, dict):
        return script.get(key, default)
    return getattr(script, key, default)


def _text_of(output):
    """A tool output is a string, or a list of content items, or an object
    wrapping either ({"content": ..., "success": ...} in older clients)."""
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        parts = []
        for part in output:
            if isinstance(part, dict):
                parts.append(part.get("text") or part.get("output") or "")
            else:
                parts.append(str(part))
        return "".join(parts)
    if isinstance(output, dict):
        if "content" in output:
            return _text_of(output["content"])
        if "text" in output:
            return _text_of(output["text"])
    return json.dumps(output)


def _input_items(body):
    items = body.get("input") or []
    if isinstance(items, str):  # a bare prompt string is legal in the API
        return []
    return [i for i in items if isinstance(i, dict)]


def tool_results(body):
    """The outputs of the tool calls this request reports, in order."""
    return [_text_of(i.get("output")) for i in _input_items(body)
            if i.get("type") in OUTPUT_TYPES]


def _tool_names(body):
    names = set()
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if t.get("name"):
            names.add(t["name"])
        elif isinstance(t.get("function"), dict) and t["function"].get("name"):
            names.add(t["function"]["name"])
    return names


class _Stream:
    """Writes one response as the Responses API streams it."""

    def __init__(self, body, sse):
        self.sse = sse
        self.seq = 0
        self.output = []
        self.response = {
            "id": "resp_" + uuid.uuid4().hex,
            "object": "response",
            "created_at": 0,
            "status": "in_progress",
            "model": body.get("model", "scripted"),
            "output": [],
        }

    def event(self, etype, data):
        data = dict(data, type=etype, sequence_number=self.seq)
        self.seq += 1
        self.sse(etype, data)

    def start(self):
        self.event("response.created", {"response": self.response})
        self.event("response.in_progress", {"response": self.response})

    def item(self, item, text=None):
        index = len(self.output)
        pending = dict(item, status="in_progress")
        if text is not None:
            pending["content"] = []
        self.event("response.output_item.added",
                   {"output_index": index, "item": pending})
        if text is not None:
            part = {"type": "output_text", "text": "", "annotations": []}
            common = {"item_id": item["id"], "output_index": index,
                      "content_index": 0}
            self.event("response.content_part.added", dict(common, part=part))
            self.event("response.output_text.delta", dict(common, delta=text))
            self.event("response.output_text.done", dict(common, text=text))
            self.event("response.content_part.done",
                       dict(common, part=dict(part, text=text)))
        elif item["type"] == "function_call":
            common = {"item_id": item["id"], "output_index": index}
            self.event("response.function_call_arguments.delta",
                       dict(common, delta=item["arguments"]))
            self.event("response.function_call_arguments.done",
                       dict(common, arguments=item["arguments"]))
        done = dict(item, status="completed")
        self.event("response.output_item.done",
                   {"output_index": index, "item": done})
        self.output.append(done)

    def message(self, text):
        mid = "msg_" + uuid.uuid4().hex
        self.item({"type": "message", "id": mid, "role": "assistant",
                   "content": [{"type": "output_text", "text": text,
                                "annotations": []}]}, text=text)

    def finish(self):
        done = dict(self.response, status="completed", output=self.output,
                    usage={"input_tokens": 10,
                           "input_tokens_details": {"cached_tokens": 0},
                           "output_tokens": 10,
                           "output_tokens_details": {"reasoning_tokens": 0},
                           "total_tokens": 20})
        self.final = done
        self.event("response.completed", {"response": done})


def _select(body, script):
    """("side", None) | ("step", i) | ("final", len(steps))."""
    offered = _tool_names(body)
    n = len(tool_results(body))
    if hasattr(script, "select"):  # the core's Script
        return script.select(offered, n)
    steps = _get(script, "steps", []) or []
    if not offered or not {s["tool"] for s in steps} <= offered:
        return ("side", None)
    return ("step", n) if n < len(steps) else ("final", len(steps))


def _call_id(script, step):
    if hasattr(script, "call_id"):  # the core's id scheme, which --results maps
        return script.call_id(step, "call")
    return f"call_confine_{step}_{uuid.uuid4().hex[:12]}"


def _respond(body, script, stream):
    kind, i = _select(body, script)
    stream.start()
    if kind == "side":
        stream.message(_get(script, "side_text", SIDE_TEXT) or SIDE_TEXT)
    elif kind == "final":
        stream.message(_get(script, "final", "done") or "done")
    else:
        step = _get(script, "steps")[i]
        name, call_id = step["tool"], _call_id(script, i)
        if "raw" in step:
            stream.item({"type": "custom_tool_call",
                         "id": "ctc_" + uuid.uuid4().hex, "call_id": call_id,
                         "name": name, "input": step["raw"]})
        else:
            stream.item({"type": "function_call",
                         "id": "fc_" + uuid.uuid4().hex, "call_id": call_id,
                         "name": name,
                         "arguments": json.dumps(step.get("input", {}))})
    stream.finish()
    return stream.final


def handle(body, script, sse):
    """Answer a streaming request: one response, as SSE events."""
    _respond(body, script, _Stream(body, sse))


def handle_json(body, script):
    """Answer a `"stream": false` request: the completed response object."""
    return _respond(body, script, _Stream(body, lambda event, data: None))
