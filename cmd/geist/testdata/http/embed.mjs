// Embeds texts through geist serve with the official clients: Ollama's
// ollama.embed (and the legacy ollama.embeddings) and OpenAI's
// openai.embeddings.create (which asks for base64 unless told float).
// Prints one JSON object for serve_embed_test.go.
//
//   NODE_PATH=DIR/node_modules node embed.mjs http://127.0.0.1:PORT MODEL TEXTS_JSON
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const { Ollama } = require("ollama");
const OpenAI = require("openai").default ?? require("openai");

const [url, model, textsJSON] = process.argv.slice(2);
const texts = JSON.parse(textsJSON);
const out = {};
const ollama = new Ollama({ host: url });
const r = await ollama.embed({ model, input: texts });
out.ollama = r.embeddings;
out.ollamaCount = r.prompt_eval_count;
out.ollamaOne = (await ollama.embed({ model, input: texts[0] })).embeddings;
out.legacy = (await ollama.embeddings({ model, prompt: texts[0] })).embedding;

const openai = new OpenAI({ baseURL: url + "/v1", apiKey: "unused" });
const o = await openai.embeddings.create({ model, input: texts });
out.openai = o.data.map((d) => d.embedding);
out.openaiIndex = o.data.map((d) => d.index);
out.openaiUsage = o.usage;
const f = await openai.embeddings.create({ model, input: texts[0], encoding_format: "float" });
out.openaiFloat = f.data[0].embedding;
try {
  await ollama.embed({ model, input: "x ".repeat(5000), truncate: false });
  out.tooLong = "accepted";
} catch (e) {
  out.tooLong = String(e.status_code ?? e.status) + " " + e.message;
}
console.log(JSON.stringify(out));
