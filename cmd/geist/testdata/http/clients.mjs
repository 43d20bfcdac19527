// Drives geist serve's HTTP API with the official clients: Ollama's
// JavaScript client (npm "ollama") and OpenAI's (npm "openai"). Prints one
// JSON object with what each call returned, for serve_clients_test.go.
//
//   NODE_PATH=DIR/node_modules node clients.mjs http://127.0.0.1:PORT MODEL PROMPT MAXTOKENS
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const { Ollama } = require("ollama");
const OpenAI = require("openai").default ?? require("openai");

const [url, model, prompt, maxTokens] = process.argv.slice(2);
const n = Number(maxTokens);
const out = {};
const ollama = new Ollama({ host: url });

out.version = (await ollama.version()).version;
out.list = (await ollama.list()).models.map((m) => m.name);
out.ps = (await ollama.ps()).models.map((m) => [m.name, m.context_length]);
const show = await ollama.show({ model });
out.show = { capabilities: show.capabilities, family: show.details.family, template: show.template.length > 0 };

const messages = [{ role: "user", content: prompt }];
const options = { temperature: 0, num_predict: n };
out.chat = (await ollama.chat({ model, messages, options, stream: false })).message.content;
let streamed = "";
let final = null;
for await (const part of await ollama.chat({ model, messages, options, stream: true })) {
  streamed += part.message.content;
  if (part.done) final = part;
}
out.chatStream = streamed;
out.chatFinal = { done_reason: final.done_reason, eval_count: final.eval_count, eval_duration: final.eval_duration > 0, prompt_eval_count: final.prompt_eval_count };
out.generate = (await ollama.generate({ model, prompt, options, stream: false })).response;
let gen = "";
for await (const part of await ollama.generate({ model, prompt, options, stream: true })) gen += part.response;
out.generateStream = gen;

const openai = new OpenAI({ baseURL: url + "/v1", apiKey: "unused" });
out.openaiModels = (await openai.models.list()).data.map((m) => m.id);
const oc = await openai.chat.completions.create({ model, messages, temperature: 0, max_tokens: n });
out.openaiChat = oc.choices[0].message.content;
out.openaiUsage = oc.usage;
let os = "";
let usage = null;
const stream = await openai.chat.completions.create({ model, messages, temperature: 0, max_tokens: n, stream: true, stream_options: { include_usage: true } });
for await (const chunk of stream) {
  if (chunk.choices.length > 0) os += chunk.choices[0].delta.content ?? "";
  if (chunk.usage) usage = chunk.usage;
}
out.openaiChatStream = os;
out.openaiStreamUsage = usage;
const comp = await openai.completions.create({ model, prompt, temperature: 0, max_tokens: n });
out.openaiCompletion = comp.choices[0].text;
try {
  await ollama.chat({ model: "no-such-model", messages });
  out.wrongModel = "accepted";
} catch (e) {
  out.wrongModel = String(e.status_code ?? e.status) + " " + e.message;
}
console.log(JSON.stringify(out));
