// Home Assistant's llama_cpp integration (homeassistant/components/llama_cpp,
// core PR #175580) against geist serve, with the official npm "openai"
// client making the calls HA's Python client makes, in the same shapes:
//   - the config flow: models.list, then a chat completion with a test tool
//     and max_tokens 3, plain and streamed (stream support is detected so);
//   - a conversation: tools as OpenAPI 3.1 schemas (probatio.to_openapi
//     "3.1.0": type arrays with null, anyOf, enum arrays, an empty object),
//     user = the conversation id, max_tokens 3000, top_p 1, temperature
//     0.7, the streamed answer read as HA's _transform_stream reads it (only
//     delta.tool_calls[0], arguments appended while the index stays), each
//     call answered by a tool message {"data", "error"} JSON, up to
//     MAX_TOOL_ITERATIONS = 10 rounds; and one round not streamed (HA's
//     default when the server's streaming is not detected);
//   - an AI Task: response_format json_schema with strict true, plain and
//     streamed;
//   - an AI Task with an image attachment, and one with a PDF: a 400 naming
//     what geist runs.
// The arrays and strings are bounded (as probatio renders vol.Length) so
// that the random test model ends its calls. The tiny test model never chooses a call on its own, so the rounds but
// the last ask with tool_choice "required" (the one field HA does not send);
// the last round is HA's request exactly.
//
//   NODE_PATH=DIR/node_modules node ha_llama_cpp.mjs http://127.0.0.1:PORT
import { createRequire } from "node:module";

const require = createRequire(process.env.NODE_PATH + "/");
const OpenAI = require("openai").default ?? require("openai");

const [url] = process.argv.slice(2);
const client = new OpenAI({ baseURL: url + "/v1", apiKey: "sk-0000000000000000000" });
const out = {};

// The config flow.
const models = [];
for await (const m of client.models.list()) models.push(m.id);
out.models = models;
const model = models[0];
const testTools = [{ type: "function", function: { name: "test_function", description: "Test function.", parameters: { type: "object", properties: {} } } }];
const testMessages = [
  { role: "system", content: "You are a helpful assistant." },
  { role: "user", content: "What is the capital of France?" },
];
const v = await client.chat.completions.create({ model, messages: testMessages, tools: testTools, max_tokens: 3, stream: false });
out.validate = v.choices[0].finish_reason;
let streamSupport = false;
for await (const ev of await client.chat.completions.create({ model, messages: testMessages, tools: testTools, max_tokens: 3, stream: true })) {
  if (ev.choices.length && ev.choices[0].finish_reason) streamSupport = true;
}
out.streamSupport = streamSupport;

// Tools as probatio.to_openapi(..., openapi_version="3.1.0") renders HA's
// intents.
const tools = [
  { type: "function", function: { name: "HassTurnOn", description: "Turns on/opens/presses a device or entity.", parameters: {
    type: "object", properties: {
      name: { type: "string", maxLength: 20 }, area: { type: "string", maxLength: 20 }, floor: { type: "string", maxLength: 20 },
      domain: { type: "array", items: { type: "string", enum: ["light", "switch", "fan", "cover"] }, maxItems: 2 },
      device_class: { type: "array", items: { type: "string", enum: ["outlet", "switch", "awning", "blind"] }, maxItems: 2 },
    }, required: [] } } },
  { type: "function", function: { name: "HassLightSet", description: "Sets the brightness percentage or color of a light.", parameters: {
    type: "object", properties: {
      name: { type: "string", maxLength: 20 }, area: { type: ["string", "null"], maxLength: 20 },
      brightness: { type: ["integer", "null"], minimum: 0, maximum: 100 },
      color: { anyOf: [{ type: "string", maxLength: 12 }, { type: "null" }] },
    }, required: ["brightness"] } } },
  { type: "function", function: { name: "GetLiveContext", description: "Provides real-time information about the CURRENT state of devices.", parameters: { type: "object", properties: {}, required: [] } } },
];

// HA's _transform_stream: the deltas of one answer as HA gathers them.
async function transformStream(stream) {
  let current = null, content = "", role = null, finish = null;
  const calls = [];
  for await (const chunk of stream) {
    if (!chunk.choices.length) continue;
    const choice = chunk.choices[0];
    if (choice.finish_reason) {
      if (current) calls.push({ id: current.id, tool_name: current.tool_name, tool_args: current.tool_args ? JSON.parse(current.tool_args) : {} });
      finish = choice.finish_reason;
      break;
    }
    const delta = choice.delta;
    if (current === null && !delta.tool_calls) {
      if (role === null && delta.role === "assistant") role = "assistant";
      if (delta.content != null) content += delta.content;
      continue;
    }
    const d = delta.tool_calls?.[0];
    if (!d || !d.function) continue;
    if (current && d.index === current.index) {
      current.tool_args += d.function.arguments ?? "";
      continue;
    }
    if (current) calls.push({ id: current.id, tool_name: current.tool_name, tool_args: JSON.parse(current.tool_args) });
    current = { index: d.index, id: d.id, tool_name: d.function.name, tool_args: d.function.arguments ?? "" };
  }
  return { role, content, calls, finish };
}

// HA's _convert_content_to_param and the tool results.
function extend(messages, answer) {
  const m = { role: "assistant", content: answer.content };
  if (answer.calls.length) {
    m.tool_calls = answer.calls.map((c) => ({ id: c.id, function: { arguments: JSON.stringify(c.tool_args), name: c.tool_name }, type: "function" }));
  }
  messages.push(m);
  for (const c of answer.calls) {
    const data = { speech: {}, response_type: "action_done", data: { targets: [], success: [{ name: c.tool_args.name ?? "Kitchen", type: "entity", id: "light.kitchen" }], failed: [] } };
    messages.push({ role: "tool", tool_call_id: c.id, content: JSON.stringify({ data, error: null }) });
  }
}

const conversationId = "01JXYZCONVERSATION0000000000";
const system = "You are a voice assistant for Home Assistant.\nAnswer questions about the world truthfully.\nCurrent time is 21:00.";
const messages = [{ role: "system", content: system }, { role: "user", content: "Turn on the kitchen light and set the hall to 40 percent." }];
out.rounds = [];
for (let iteration = 0; iteration < 10; iteration++) {
  const req = { messages, model, tools, max_tokens: 3000, top_p: 1.0, temperature: 0.7, user: conversationId, stream: true };
  if (iteration < 9) req.tool_choice = "required";
  const answer = await transformStream(await client.chat.completions.create(req));
  out.rounds.push({ calls: answer.calls.map((c) => c.tool_name), args: answer.calls.map((c) => c.tool_args), finish: answer.finish, role: answer.role });
  extend(messages, answer);
  if (!answer.calls.length) break;
}
out.messages = messages.length;

// One round not streamed (HA's _transform_response).
{
  const msgs = [{ role: "system", content: system }, { role: "user", content: "Turn on the kitchen light." }];
  const r = await client.chat.completions.create({ messages: msgs, model, tools, max_tokens: 3000, top_p: 1.0, temperature: 0.7, user: conversationId, stream: false, tool_choice: "required" });
  const m = r.choices[0].message;
  const calls = (m.tool_calls ?? []).map((c) => ({ id: c.id, tool_name: c.function.name, tool_args: JSON.parse(c.function.arguments) }));
  extend(msgs, { content: m.content, calls });
  const r2 = await client.chat.completions.create({ messages: msgs, model, tools, max_tokens: 3000, top_p: 1.0, temperature: 0.7, user: conversationId, stream: false });
  out.plain = { calls: calls.map((c) => c.tool_name), finish: r.choices[0].finish_reason, then: r2.choices[0].finish_reason, thenRole: r2.choices[0].message.role };
}

// The AI Task: a structure as probatio renders it, strict.
const structure = {
  type: "object",
  properties: {
    characters: { type: "array", items: { type: "string", maxLength: 12 }, maxItems: 3 },
    mood: { type: "string", enum: ["happy", "sad", "calm"] },
    count: { type: ["integer", "null"], minimum: 0, maximum: 9 },
  },
  required: ["characters", "mood", "count"],
  additionalProperties: false,
};
const responseFormat = { type: "json_schema", json_schema: { name: "Describe the scene", strict: true, schema: structure } };
const taskMessages = [{ role: "system", content: "You are a Home Assistant expert and help users with their tasks." }, { role: "user", content: "Describe the scene at the door." }];
out.tasks = [];
for (const stream of [false, true]) {
  const r = await client.chat.completions.create({ messages: taskMessages, model, response_format: responseFormat, max_tokens: 3000, top_p: 1.0, temperature: 0.7, user: "01JXYZTASK", stream });
  let text = "";
  if (stream) {
    for await (const ch of r) text += ch.choices[0]?.delta?.content ?? "";
  } else {
    text = r.choices[0].message.content;
  }
  out.tasks.push(JSON.parse(text));
}

// An AI Task with an image attachment.
try {
  await client.chat.completions.create({ model, max_tokens: 3000, user: "01JXYZTASK", messages: [{ role: "user", content: [
    { type: "text", text: "What is on the camera?" },
    { type: "image_url", image_url: { url: "data:image/jpeg;base64,/9j/4AAQSkZJRgABAQ", detail: "auto" } }] }] });
  out.image = "accepted";
} catch (e) {
  out.image = `${e.status} ${e.error?.message ?? e.message}`;
}
// An AI Task with a PDF attachment, as HA's integration sends one: a text
// part "[File: NAME]\nContent: BASE64".
try {
  await client.chat.completions.create({ model, max_tokens: 3000, user: "01JXYZTASK", messages: [{ role: "user", content: [
    { type: "text", text: "Summarize the bill" },
    { type: "text", text: "[File: bill.pdf]\nContent: JVBERi0xLjcKJcfsj6IKNSAwIG9iago=" }] }] });
  out.pdf = "accepted";
} catch (e) {
  out.pdf = `${e.status} ${e.error?.message ?? e.message}`;
}
console.log(JSON.stringify(out));
