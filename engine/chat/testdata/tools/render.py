#!/usr/bin/python3
"""Render chat templates as Hugging Face transformers' apply_chat_template
does, for geist's tool-calling goldens (engine/chat tools_golden_test.go).

Reads one JSON object from stdin:
  {"templates": {NAME: SOURCE}, "cases": [{"template": NAME, "messages": [...],
   "tools": [...] or null, "add_generation_prompt": bool, "bos_token": str,
   "eos_token": str, "date": "YYYY-MM-DD"}]}
and writes a JSON list with, per case, {"prompt": TEXT} or {"error": TEXT}.

The environment is transformers' (utils/chat_template_utils.py,
_compile_jinja_template): an ImmutableSandboxedEnvironment with trim_blocks
and lstrip_blocks, the loopcontrols extension and transformers' generation
tags ({% generation %} ... {% endgeneration %}, which mark the assistant's
text for training masks: the body renders unchanged, as a call block, the
way transformers' extension builds it); tojson replaced by
json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
sort_keys=sort_keys) (no HTML escaping, keys in insertion order);
raise_exception and strftime_now as globals (strftime_now reads the case's
date, so the golden is reproducible). Messages and tools are passed as the
dicts given; tools=None when the case has none, as transformers passes it.
enable_thinking is True, as llama.cpp and geist pass it (transformers leaves
it undefined, which Qwen3's template reads as true and Gemma 4's as false);
a case's "kwargs" (chat_template_kwargs) are passed as further variables and
may override it.
A case with "geist_tools" gives its tools to a template that has no tools
variable the way geist documents it (engine/chat tools.go), written here
independently: "system_field" (Phi-4-mini) puts json.dumps of the list of
the definitions' "function" objects into the system message's "tools" (a
system message "You are a helpful assistant with some tools." is added when
there is none); "system_text" (SmolLM3's templates without tools) appends
"### Tools" and the block SmolLM3's own template writes for xml_tools (each
tool as str(dict)) to the system message. In both an assistant message's
tool_calls are written after its content in the model's syntax.
"xml_tools" passes the tools as xml_tools (SmolLM3's own template's name),
with the assistants' tool_calls written into their content as above.
Needs Debian's python3-jinja2 (apt-get install python3-jinja2).
"""
import datetime
import json
import sys

import jinja2.ext
from jinja2 import nodes
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


SMOL_HEAD = ("You may call one or more functions to assist with the user query.\n"
             "You are provided with function signatures within <tools></tools> XML tags:\n\n<tools>\n")
SMOL_TAIL = ("</tools>\n\nFor each function call, return a json object with function name and arguments "
             "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
             "\"arguments\": <args-json-object>}\n</tool_call>")


class GenerationTags(jinja2.ext.Extension):
    """{% generation %} ... {% endgeneration %}: the body, as a call block
    whose caller is rendered unchanged (transformers records where that
    text falls in the prompt; nothing here needs the spans)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def call_objects(m):
    out = []
    for c in m.get("tool_calls") or []:
        f = c["function"]
        args = f.get("arguments")
        if isinstance(args, str):
            try:
                parsed = json.loads(args)
                if isinstance(parsed, dict):
                    args = parsed
            except ValueError:
                pass
        out.append(json.dumps({"name": f["name"], "arguments": args if args is not None else {}}, ensure_ascii=False))
    return out


def calls_as_text(place, messages):
    """The messages with each assistant's tool_calls written after its content."""
    msgs = [dict(m) for m in messages]
    for m in msgs:
        objs = call_objects(m)
        if not objs:
            continue
        if place == "system_field":
            text = "<|tool_call|>[" + ", ".join(objs) + "]<|/tool_call|>"
        else:
            text = "\n".join("<tool_call>\n" + o + "\n</tool_call>" for o in objs)
            if m.get("content"):
                text = "\n" + text
        m["content"] = (m.get("content") or "") + text
        del m["tool_calls"]
    return msgs


def place_tools(place, messages, tools):
    """The messages a template without a tools variable renders (see the docstring)."""
    msgs = calls_as_text(place, messages)
    if place == "system_field":
        if not msgs or msgs[0]["role"] != "system":
            msgs.insert(0, {"role": "system", "content": "You are a helpful assistant with some tools."})
        msgs[0]["tools"] = json.dumps([t.get("function", t) for t in tools], ensure_ascii=False)
    else:
        if not msgs or msgs[0]["role"] != "system":
            msgs.insert(0, {"role": "system", "content": ""})
        sys_text = msgs[0]["content"].rstrip()
        block = SMOL_HEAD + "".join(str(t) + "\n" for t in tools) + SMOL_TAIL
        msgs[0]["content"] = (sys_text + "\n\n" if sys_text else "") + "### Tools\n\n" + block
    return msgs


def main():
    req = json.load(sys.stdin)
    out = []
    for case in req["cases"]:
        date = datetime.datetime.strptime(case.get("date") or "2024-07-26", "%Y-%m-%d")

        def raise_exception(message):
            raise TemplateError(message)

        def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
            return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

        def strftime_now(fmt):
            return date.strftime(fmt)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols, GenerationTags])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = strftime_now
        try:
            tmpl = env.from_string(req["templates"][case["template"]])
            messages, tools = case["messages"], case.get("tools")
            extra = {"enable_thinking": True}
            extra.update(case.get("kwargs") or {})
            if case.get("geist_tools") == "xml_tools":
                if tools:
                    messages = calls_as_text("xml_tools", messages)
                extra["xml_tools"], tools = tools, None
            elif case.get("geist_tools") and tools:
                messages, tools = place_tools(case["geist_tools"], messages, tools), None
            prompt = tmpl.render(
                messages=messages,
                tools=tools,
                documents=None,
                add_generation_prompt=case.get("add_generation_prompt", False),
                bos_token=case.get("bos_token", ""),
                eos_token=case.get("eos_token", ""),
                **extra,
            )
            out.append({"prompt": prompt})
        except Exception as e:  # a template's raise_exception, or a bad case
            out.append({"error": "%s: %s" % (type(e).__name__, e)})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
