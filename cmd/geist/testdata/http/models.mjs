// Several models in one geist serve, through the official npm "ollama"
// client: /api/tags lists every stored model, a chat names another stored
// model and is answered by it (loaded on demand), /api/ps shows it with
// its expiry, keep_alive 0 unloads it, a model not stored is a 404; the
// first model unloads with keep_alive 0 too and loads again on demand.
// Prints one JSON object for serve_models_test.go's TestServeModelSwitch.
//
//   NODE_PATH=DIR/node_modules node models.mjs http://127.0.0.1:PORT FIRST OTHER THIRD PROMPT N
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const { Ollama } = require("ollama");

const [url, first, other, third, prompt, n] = process.argv.slice(2);
const ollama = new Ollama({ host: url });
const out = {};
const messages = [{ role: "user", content: prompt }];
const options = { temperature: 0, num_predict: Number(n) };
const ps = async () => (await ollama.ps()).models.map((m) => [m.name, m.expires_at]);

out.list = (await ollama.list()).models.map((m) => m.name);
out.psBefore = await ps();
out.other = (await ollama.chat({ model: other, messages, options, stream: false })).message.content;
out.psLoaded = await ps();
let streamed = "";
for await (const part of await ollama.chat({ model: other, messages, options, stream: true })) streamed += part.message.content;
out.otherStreamed = streamed;
out.first = (await ollama.chat({ model: first, messages, options, stream: false })).message.content;
out.third = (await ollama.generate({ model: third, prompt, options, stream: false, keep_alive: -1 })).response;
out.psBoth = await ps();
out.unload = (await ollama.generate({ model: other, prompt: "", keep_alive: 0 })).done_reason;
out.psAfter = await ps();
try {
  await ollama.chat({ model: "not-stored", messages, stream: false });
  out.missing = "answered";
} catch (e) {
  out.missing = `${e.status_code ?? e.status} ${e.message}`;
}
out.unloadFirst = (await ollama.generate({ model: first, prompt: "", keep_alive: 0 })).done_reason;
out.psFirstGone = await ps();
out.firstAgain = (await ollama.chat({ model: first, messages, options, stream: false })).message.content;
out.psFirstBack = await ps();
console.log(JSON.stringify(out));
