// Asks geist serve for structured answers through the official clients
// (npm "ollama" and "openai"): an Ollama format schema, format "json",
// OpenAI's response_format json_schema, tool_choice required and a named
// function, and a schema keyword geist cannot enforce. Prints one JSON
// object for serve_structured_test.go.
//
//   NODE_PATH=DIR/node_modules node structured.mjs http://127.0.0.1:PORT MODEL SCHEMA_JSON TOOLS_JSON SEEDS
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const { Ollama } = require("ollama");
const OpenAI = require("openai").default ?? require("openai");

const [url, model, schemaText, toolsText, seedsText] = process.argv.slice(2);
const schema = JSON.parse(schemaText);
const tools = JSON.parse(toolsText);
const seeds = Number(seedsText);
const out = { ollamaFormat: [], ollamaJSON: [], openaiSchema: [], toolsRequired: [], toolsNamed: [] };
const ollama = new Ollama({ host: url });
const openai = new OpenAI({ baseURL: url + "/v1", apiKey: "unused" });
const messages = [{ role: "user", content: "Describe the weather as JSON." }];

for (let seed = 1; seed <= seeds; seed++) {
  const options = { temperature: 0.8, seed, num_predict: 400 };
  const r = await ollama.chat({ model, messages, format: schema, options, stream: false });
  out.ollamaFormat.push([r.message.content, r.done_reason]);
  const g = await ollama.generate({ model, prompt: "A JSON object:", format: "json", options, stream: false });
  out.ollamaJSON.push([g.response, g.done_reason]);
  const o = await openai.chat.completions.create({
    model, messages, temperature: 0.8, seed, max_tokens: 400,
    response_format: { type: "json_schema", json_schema: { name: "weather", schema, strict: true } },
  });
  out.openaiSchema.push([o.choices[0].message.content, o.choices[0].finish_reason]);
  const call = [{ role: "user", content: "Turn on the kitchen light." }];
  const t = await openai.chat.completions.create({ model, messages: call, tools, tool_choice: "required", temperature: 0.8, seed, max_tokens: 400 });
  out.toolsRequired.push([t.choices[0].message.tool_calls ?? null, t.choices[0].finish_reason, t.choices[0].message.content]);
  const n = await openai.chat.completions.create({
    model, messages: call, tools, tool_choice: { type: "function", function: { name: tools[1].function.name } }, temperature: 0.8, seed, max_tokens: 400,
  });
  out.toolsNamed.push([n.choices[0].message.tool_calls ?? null, n.choices[0].finish_reason, n.choices[0].message.content]);
}
for (const [what, f] of [
  ["ollama", () => ollama.chat({ model, messages, format: { type: "object", minProperties: 1 }, stream: false })],
  ["openai", () => openai.chat.completions.create({ model, messages, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "string", format: "hostname" } } } })],
]) {
  try {
    await f();
    out[what + "Refused"] = "accepted";
  } catch (e) {
    out[what + "Refused"] = String(e.status_code ?? e.status) + " " + e.message;
  }
}
console.log(JSON.stringify(out));
