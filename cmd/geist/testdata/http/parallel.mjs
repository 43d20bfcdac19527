// Concurrent requests with the official clients (npm "ollama" and
// "openai") against geist serve --parallel: three requests run alone one
// after another, then together while a fourth streams, and a title
// request is sent during that stream. Prints one JSON object for
// serve_parallel_test.go.
//
//   NODE_PATH=DIR/node_modules node parallel.mjs http://127.0.0.1:PORT MODEL
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const { Ollama } = require("ollama");
const OpenAI = require("openai").default ?? require("openai");

const [url, model] = process.argv.slice(2);
const ollama = new Ollama({ host: url });
const openai = new OpenAI({ baseURL: url + "/v1", apiKey: "unused" });

const three = [
  // greedy, Ollama's chat
  async () => (await ollama.chat({ model, messages: [{ role: "user", content: "Once upon a time" }], options: { temperature: 0, num_predict: 40 }, stream: false })).message.content,
  // seeded sampling, Ollama's generate, streamed
  async () => {
    let s = "";
    for await (const p of await ollama.generate({ model, prompt: "The little dog", options: { temperature: 0.9, top_k: 40, seed: 42, num_predict: 48 }, stream: true })) s += p.response;
    return s;
  },
  // seeded sampling, OpenAI's chat
  async () => (await openai.chat.completions.create({ model, messages: [{ role: "user", content: "Lily and Tom went to the park" }], temperature: 0.8, seed: 7, max_tokens: 36 })).choices[0].message.content,
];

const out = { alone: [], together: [] };
for (const f of three) out.alone.push(await f());

// The fourth streams a long answer; the three and a title request start
// once its first piece came.
const t0 = Date.now();
let first;
const started = new Promise((r) => (first = r));
const streamDone = (async () => {
  let s = "";
  let n = 0;
  for await (const p of await ollama.chat({ model, messages: [{ role: "user", content: "Tell me a long story" }], options: { temperature: 0.7, seed: 1, num_predict: 1500 }, stream: true })) {
    s += p.message.content;
    if (++n === 2) first();
  }
  out.streamChars = s.length;
  return Date.now() - t0;
})();
await started;
const titleDone = (async () => {
  await ollama.generate({ model, prompt: "Title:", options: { temperature: 0, num_predict: 6 }, stream: false });
  return Date.now() - t0;
})();
out.together = await Promise.all(three.map((f) => f()));
out.title = await titleDone;
out.stream = await streamDone;
out.threeDone = Date.now() - t0;
console.log(JSON.stringify(out));
