// The official TypeScript SDK 2.x client with @modelcontextprotocol/ext-tasks, speaking the official
// tasks extension (io.modelcontextprotocol/tasks, protocol 2026-07-28) to a jupyter-mcp server. Run by
// tests/test_task_dialects.py: `node tasks_official.mjs SCENARIO` with URL, TOKEN, NB (a notebook path)
// and CELL (a cell id) in the environment. Prints what it saw as one JSON line.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { createApplicationInputHandler, createTaskSessionFromClient, resultFromTaskOutcome }
  from '@modelcontextprotocol/ext-tasks/client';

const { URL: url, TOKEN, NB, CELL, KEY } = process.env;
const protocolVersion = '2026-07-28';
const clientInfo = { name: 'tasks-official-test', version: '1.0.0' };
const scenario = process.argv[2];
const seen = {};
// The input scenario's client can answer elicitations (form mode), and answers "Ada".
const clientCapabilities = scenario === 'input' ? { elicitation: { form: {} } } : {};
const refuse = () => { throw new Error('not asked for in this test'); };
const onInputRequest = createApplicationInputHandler({
  elicitation: async (request) => {
    (seen.asked ??= []).push(request.params);
    return { action: 'accept', content: { value: 'Ada' } };
  },
  sampling: refuse,
  roots: refuse,
});

async function open() {
  const transport = new StreamableHTTPClientTransport(new URL(url),
    { requestInit: { headers: { Authorization: `token ${TOKEN}` } } });
  const client = new Client(clientInfo, { capabilities: clientCapabilities,
    versionNegotiation: { mode: { pin: protocolVersion } } });
  await client.connect(transport);
  // The library sends tools/call and tasks/* itself (the SDK's typed path refuses resultType
  // "task"): it is given the transport to send raw requests on, as its documentation says.
  const pending = new Map();
  let sequence = 0;
  const sdkOnMessage = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const waiting = typeof message?.id === 'string' ? pending.get(message.id) : undefined;
    if (waiting && ('result' in message || 'error' in message)) {
      pending.delete(message.id);
      waiting('error' in message ? { kind: 'error', error: message.error } : { kind: 'result', result: message.result });
      return;
    }
    sdkOnMessage?.call(transport, message, extra);
  };
  function rawDispatch(request, options = {}) {
    const id = `raw-${++sequence}`;
    return new Promise((resolve, reject) => {
      pending.set(id, resolve);
      transport.send({ jsonrpc: '2.0', id, ...request }, { headers: options.context?.headers, requestSignal: options.signal })
        .catch((error) => { pending.delete(id); reject(error); });
    });
  }
  const session = createTaskSessionFromClient(client, { endpointId: `jupyter-mcp:${url}`, rawDispatch, onInputRequest,
    v2RequestFraming: { protocolVersion, clientInfo, clientCapabilities } });
  return { client, session, close: async () => { await session.close(); await client.close(); } };
}

const connection = await open();
const session = connection.session;
try {
  if (scenario === 'complete' || scenario === 'input') {
    const execution = await session.callTool('cell_execute', { path: NB, cell_id: CELL });
    seen.kind = execution.kind;
    seen.statuses = [];
    const { outcome } = await execution.settle({ onEvent: (e) => e.type === 'task' && seen.statuses.push(e.task.status) });
    seen.outcome = outcome.status;
    seen.result = resultFromTaskOutcome(outcome);
  } else if (scenario === 'quick') {
    const execution = await session.callTool('cell_get', { path: NB, cell_id: CELL });
    seen.kind = execution.kind;
    seen.result = resultFromTaskOutcome((await execution.settle()).outcome);
  } else if (scenario === 'cancel') {
    const execution = await session.callTool('cell_execute', { path: NB, cell_id: CELL });
    seen.kind = execution.kind;
    await new Promise((r) => setTimeout(r, 3000));  // the cell is running
    await execution.cancel();
    seen.outcome = (await execution.result()).status;
    seen.taskId = execution.handle.taskId;
    const controller = session.task(execution.handle.taskId);
    for (let i = 0; i < 50; i++) {  // the server's own view, until it says the task ended
      const view = await controller.snapshot();
      seen.server = view.status;
      if (['completed', 'failed', 'cancelled'].includes(view.status)) break;
      await new Promise((r) => setTimeout(r, 200));
    }
  } else if (scenario === 'retry') {
    const options = { metadata: { 'io.datalayer/idempotency-key': KEY } };
    const first = await session.callTool('cell_execute', { path: NB, cell_id: CELL }, options);
    seen.first = first.handle?.taskId;
    await first.detach();  // the connection drops; the task goes on
    const again = await open();  // a new connection retries the call, its arguments in another order
    try {
      const second = await again.session.callTool('cell_execute', { cell_id: CELL, path: NB }, options);
      seen.second = second.handle?.taskId;
      seen.result = resultFromTaskOutcome((await second.settle()).outcome);
    } finally {
      await again.close();
    }
  } else {
    throw new Error(`unknown scenario ${scenario}`);
  }
} finally {
  await connection.close();
}
console.log(JSON.stringify(seen));
