// Asks geist serve for tool calls through the official clients (npm
// "openai" and "ollama"): tool_choice required and a named function, each
// plain and streamed (the calls gathered from the stream's deltas as
// clients do), and an Ollama chat offering the tools (auto). Prints one
// JSON object for serve_structured_test.go's TestServeFamilyTools.
//
//   NODE_PATH=DIR/node_modules node family_tools.mjs http://127.0.0.1:PORT MODEL TOOLS_JSON SEEDS SYSTEM
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const { Ollama } = require("ollama");
const OpenAI = require("openai").default ?? require("openai");

const [url, model, toolsText, seedsText, system] = process.argv.slice(2);
const tools = JSON.parse(toolsText);
const seeds = Number(seedsText);
const out = { calls: [], ollama: [] };
const ollama = new Ollama({ host: url });
const openai = new OpenAI({ baseURL: url + "/v1", apiKey: "unused" });
const messages = [{ role: "system", content: system }, { role: "user", content: "Turn on the kitchen light." }];
const choices = [["required", "required"], ["named", { type: "function", function: { name: tools[1].function.name } }]];

for (let seed = 1; seed <= seeds; seed++) {
  for (const [what, tool_choice] of choices) {
    const req = { model, messages, tools, tool_choice, temperature: 0.8, seed, max_tokens: 1500 };
    const r = await openai.chat.completions.create(req);
    out.calls.push([what, r.choices[0].message.tool_calls ?? null, r.choices[0].finish_reason, r.choices[0].message.content]);
    const stream = await openai.chat.completions.create({ ...req, stream: true });
    const calls = [];
    let finish = null, content = "";
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (!c) continue;
      content += c.delta?.content ?? "";
      for (const d of c.delta?.tool_calls ?? []) {
        const cur = (calls[d.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
        if (d.id) cur.id = d.id;
        if (d.function?.name) cur.function.name += d.function.name;
        if (d.function?.arguments) cur.function.arguments += d.function.arguments;
      }
      finish = c.finish_reason ?? finish;
    }
    out.calls.push([what + " streamed", calls.length ? calls : null, finish, content]);
  }
  const o = await ollama.chat({ model, messages, tools, options: { temperature: 0.8, seed, num_predict: 40 }, stream: false });
  out.ollama.push([o.message.tool_calls ?? null, o.done_reason, o.message.content, o.prompt_eval_count]);
}
console.log(JSON.stringify(out));
