// The official TypeScript SDK 1.x and its experimental task client, speaking the 2025-11-25 core
// tasks to a jupyter-mcp server. Run by tests/test_task_dialects.py: `node tasks_core.mjs SCENARIO`
// with URL, TOKEN, NB (a notebook path) and CELL (a cell id) in the environment. Prints what it saw
// as one JSON line; the test asserts on it.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const { URL: url, TOKEN, NB, CELL, KEY } = process.env;
const scenario = process.argv[2];
const seen = {};
// The input scenario's client can answer elicitations (form mode), and answers "Ada".
const capabilities = scenario === 'input' ? { elicitation: { form: {} } } : {};
const client = new Client({ name: 'tasks-core-test', version: '1.0.0' },
  { capabilities, defaultTaskPollInterval: 500 });
if (scenario === 'input') {
  seen.asked = [];
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    seen.asked.push(request.params);
    return { action: 'accept', content: { value: 'Ada' } };
  });
}
await client.connect(new StreamableHTTPClientTransport(new URL(url),
  { requestInit: { headers: { Authorization: `token ${TOKEN}` } } }));
const tasks = client.experimental.tasks;
const call = { name: 'cell_execute', arguments: { path: NB, cell_id: CELL } };

async function created(params) {
  // The first message of a task call is its creation; stop listening there.
  const stream = tasks.callToolStream(params, CallToolResultSchema, { task: { ttl: 60000 }, timeout: 120000 });
  const first = await stream.next();
  await stream.return();
  if (first.value.type !== 'taskCreated') throw new Error(`expected taskCreated, got ${JSON.stringify(first.value)}`);
  return first.value.task;
}

if (scenario === 'complete' || scenario === 'input') {
  seen.statuses = [];
  for await (const m of tasks.callToolStream(call, CallToolResultSchema, { task: { ttl: 60000 }, timeout: 120000 })) {
    if (m.type === 'taskCreated') seen.created = m.task;
    if (m.type === 'taskStatus') seen.statuses.push(m.task.status);
    if (m.type === 'result') seen.result = m.result;
    if (m.type === 'error') seen.error = { code: m.error.code, message: m.error.message };
  }
} else if (scenario === 'wait') {
  // tasks/result on a working task waits for its end, then answers what the call would have
  const task = await created(call);
  seen.created = task;
  seen.result = await tasks.getTaskResult(task.taskId, CallToolResultSchema, { timeout: 120000 });
  seen.after = await tasks.getTask(task.taskId);
} else if (scenario === 'cancel') {
  const task = await created(call);
  await new Promise((r) => setTimeout(r, 3000));  // the cell is running
  seen.cancelled = await tasks.cancelTask(task.taskId);
  seen.after = await tasks.getTask(task.taskId);
  seen.result = await tasks.getTaskResult(task.taskId, CallToolResultSchema);
  try {
    await tasks.cancelTask(task.taskId);
  } catch (error) {
    seen.again = { code: error.code, message: error.message };
  }
} else if (scenario === 'retry') {
  const keyed = { ...call, _meta: { 'io.datalayer/idempotency-key': KEY } };
  seen.first = await created(keyed);
  seen.second = await created(keyed);
  seen.result = await tasks.getTaskResult(seen.first.taskId, CallToolResultSchema, { timeout: 120000 });
} else if (scenario === 'sync') {
  // No task: a plain call, its timeout the SDK's default (60 s), reset by each progress notification
  seen.progress = [];
  const started = Date.now();
  seen.result = await client.callTool(call, CallToolResultSchema, {
    onprogress: (p) => seen.progress.push({ at: (Date.now() - started) / 1000, progress: p.progress }),
    resetTimeoutOnProgress: true });
  seen.seconds = (Date.now() - started) / 1000;
} else {
  throw new Error(`unknown scenario ${scenario}`);
}
await client.close();
console.log(JSON.stringify(seen));
