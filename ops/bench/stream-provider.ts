// A local model provider for the bench, in a process of its own so its CPU is
// not the worker's: it speaks the OpenAI chat-completions streaming protocol
// (SSE) and streams every answer at STREAM_TOKENS_PER_S tokens a second for
// STREAM_SECONDS. Each token is "t<ms> ": the time it was written, so a
// websocket client can tell how long the token took to reach it.
// GET /stats answers how many streams are open now and at most.
import { createServer } from 'node:http';

const tokensPerSecond = Number(process.env.STREAM_TOKENS_PER_S ?? 20);
const seconds = Number(process.env.STREAM_SECONDS ?? 10);
const total = Math.round(tokensPerSecond * seconds);
const stats = { open: 0, maxOpen: 0, started: 0, finished: 0 };

const event = (id: string, delta: Record<string, unknown>, finish: string | null) =>
  `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: 'bench', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/stats')
    return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats));
  req.resume();
  req.on('end', () => {
    const id = `chatcmpl-bench-${++stats.started}`;
    stats.open++;
    stats.maxOpen = Math.max(stats.maxOpen, stats.open);
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(event(id, { role: 'assistant', content: '' }, null));
    let sent = 0;
    const timer = setInterval(() => {
      if (sent < total) {
        res.write(event(id, { content: `t${Date.now()} ` }, null));
        sent++;
        return;
      }
      clearInterval(timer);
      res.write(event(id, {}, 'stop'));
      res.write(
        `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: 'bench', choices: [], usage: { prompt_tokens: 10, completion_tokens: total, total_tokens: total + 10 } })}\n\n`,
      );
      res.end('data: [DONE]\n\n');
    }, 1000 / tokensPerSecond);
    res.on('close', () => {
      clearInterval(timer);
      stats.open--;
      stats.finished++;
    });
  });
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  process.stdout.write(`${JSON.stringify({ msg: 'listening', port: (server.address() as { port: number }).port })}\n`);
});
process.on('SIGTERM', () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
});
