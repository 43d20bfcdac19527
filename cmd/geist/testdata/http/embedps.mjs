// Embedding models in geist serve's one model pool, through the official
// npm "ollama" client: /api/tags lists the stored embedding models (family,
// the embedding capability), an embed call loads one that /api/ps then
// lists with its expiry (a keep_alive duration honoured), keep_alive 0
// unloads it, keep_alive -1 keeps it for ever.
// Prints one JSON object for serve_models_test.go's TestServeEmbedPool.
//
//   NODE_PATH=DIR/node_modules node embedps.mjs http://127.0.0.1:PORT EMBED OTHER
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const { Ollama } = require("ollama");

const [url, emb, other] = process.argv.slice(2);
const ollama = new Ollama({ host: url });
const out = {};
const ps = async () => (await ollama.ps()).models.map((m) => [m.name, m.expires_at, String(m.size), m.details.family]);

out.list = (await ollama.list()).models.map((m) => [m.name, m.details.family, (m.capabilities ?? []).join(",")]);
out.psBefore = await ps();
out.dim = (await ollama.embed({ model: emb, input: ["hello world"], keep_alive: "10m" })).embeddings[0].length;
out.psLoaded = await ps();
await ollama.embed({ model: emb, input: "again", keep_alive: 0 });
out.psAfter = await ps();
await ollama.embed({ model: other, input: "kept", keep_alive: -1 });
out.psKept = await ps();
console.log(JSON.stringify(out));
