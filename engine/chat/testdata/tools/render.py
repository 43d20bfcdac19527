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
and lstrip_blocks and the loopcontrols extension; tojson replaced by
json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
sort_keys=sort_keys) (no HTML escaping, keys in insertion order);
raise_exception and strftime_now as globals (strftime_now reads the case's
date, so the golden is reproducible). Messages and tools are passed as the
dicts given; tools=None when the case has none, as transformers passes it.
enable_thinking is True, as llama.cpp and geist pass it (transformers leaves
it undefined, which Qwen3's template reads as true and Gemma 4's as false).
Needs Debian's python3-jinja2 (apt-get install python3-jinja2).
"""
import datetime
import json
import sys

import jinja2.ext
from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


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

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
        env.filters["tojson"] = tojson
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = strftime_now
        try:
            tmpl = env.from_string(req["templates"][case["template"]])
            prompt = tmpl.render(
                messages=case["messages"],
                tools=case.get("tools"),
                documents=None,
                add_generation_prompt=case.get("add_generation_prompt", False),
                bos_token=case.get("bos_token", ""),
                eos_token=case.get("eos_token", ""),
                enable_thinking=True,
            )
            out.append({"prompt": prompt})
        except Exception as e:  # a template's raise_exception, or a bad case
            out.append({"error": "%s: %s" % (type(e).__name__, e)})
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
