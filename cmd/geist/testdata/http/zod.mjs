// Asks geist serve for structured answers the way the structured-output
// helpers do, with zod 4 schemas whose integers carry zod's own bounds
// (z.number().int() is minimum -(2^53-1), maximum 2^53-1): the OpenAI
// SDK's chat.completions.parse with zodResponseFormat, and LangChain's
// ChatOpenAI withStructuredOutput (json schema and function calling).
// Prints one JSON object for serve_structured_test.go.
//
//   NODE_PATH=DIR/node_modules node zod.mjs http://127.0.0.1:PORT MODEL SEEDS
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const OpenAI = require("openai").default ?? require("openai");
const { zodResponseFormat } = require("openai/helpers/zod");
const { z } = require("zod");
const { ChatOpenAI } = require("@langchain/openai");

const [url, model, seedsText] = process.argv.slice(2);
const seeds = Number(seedsText);
const Person = z.object({
  name: z.string().max(20),
  age: z.number().int(),
  score: z.number().int().min(0).max(100),
  tags: z.array(z.string().max(8)).max(3),
});
const out = { openaiParse: [], langchainJSONSchema: [], langchainFunctionCalling: [], schema: z.toJSONSchema(Person) };
const openai = new OpenAI({ baseURL: url + "/v1", apiKey: "unused" });
const messages = [{ role: "user", content: "Describe a person as JSON." }];
const fail = (e) => ({ error: String(e.status ?? "") + " " + e.message });

for (let seed = 1; seed <= seeds; seed++) {
  try {
    const r = await openai.chat.completions.parse({
      model, messages, temperature: 0.8, seed, max_tokens: 400,
      response_format: zodResponseFormat(Person, "person"),
    });
    out.openaiParse.push({ parsed: r.choices[0].message.parsed, finish: r.choices[0].finish_reason });
  } catch (e) {
    out.openaiParse.push(fail(e));
  }
  for (const [method, key] of [["jsonSchema", "langchainJSONSchema"], ["functionCalling", "langchainFunctionCalling"]]) {
    const llm = new ChatOpenAI({ model, apiKey: "unused", configuration: { baseURL: url + "/v1" }, temperature: 0.8, maxTokens: 400, modelKwargs: { seed } });
    try {
      const parsed = await llm.withStructuredOutput(Person, { name: "person", method }).invoke("Describe a person as JSON.");
      out[key].push({ parsed });
    } catch (e) {
      out[key].push(fail(e));
    }
  }
}
console.log(JSON.stringify(out));
