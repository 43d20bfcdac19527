// Asks geist serve for tool calls through the official npm "openai"
// client with tool_choice required, parallel_tool_calls false and absent
// (the default: several calls allowed), each plain and streamed (the
// calls gathered from the stream's deltas as clients do). Prints one JSON
// object for serve_structured_test.go's TestServeParallelToolCalls.
//
//   NODE_PATH=DIR/node_modules node parallel_tools.mjs http://127.0.0.1:PORT MODEL TOOLS_JSON SEEDS
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const OpenAI = require("openai").default ?? require("openai");

const [url, model, toolsText, seedsText] = process.argv.slice(2);
const tools = JSON.parse(toolsText);
const seeds = Number(seedsText);
const out = { answers: [] };
const openai = new OpenAI({ baseURL: url + "/v1", apiKey: "unused" });
const messages = [{ role: "user", content: "Turn on the kitchen light and set the hall light to 40." }];

for (let seed = 1; seed <= seeds; seed++) {
  for (const parallel of [false, undefined]) {
    const req = { model, messages, tools, tool_choice: "required", temperature: 1, seed, max_tokens: 400 };
    if (parallel !== undefined) req.parallel_tool_calls = parallel;
    const what = parallel === false ? "one" : "parallel";
    const r = await openai.chat.completions.create(req);
    const c = r.choices[0];
    out.answers.push([what, c.message.tool_calls ?? [], c.finish_reason, c.message.content]);
    const stream = await openai.chat.completions.create({ ...req, stream: true });
    const calls = [];
    let finish = null, content = "";
    for await (const chunk of stream) {
      const ch = chunk.choices[0];
      if (!ch) continue;
      content += ch.delta?.content ?? "";
      for (const d of ch.delta?.tool_calls ?? []) {
        const cur = (calls[d.index] ??= { id: "", type: "function", function: { name: "", arguments: "" } });
        if (d.id) cur.id = d.id;
        if (d.function?.name) cur.function.name += d.function.name;
        if (d.function?.arguments) cur.function.arguments += d.function.arguments;
      }
      finish = ch.finish_reason ?? finish;
    }
    out.answers.push([what + " streamed", calls, finish, content]);
  }
}
console.log(JSON.stringify(out));
