// A TCP proxy in front of PostgreSQL that a test can cut and restore: the
// api behind it sees a real outage (refused connections, dropped sockets)
// while the test itself keeps its direct connection.
import net from 'node:net';

export type TcpProxy = {
  /** The database URL, through the proxy. */
  url: string;
  /** Drops every proxied connection and refuses new ones. */
  cut: () => Promise<void>;
  /** Accepts connections again, on the same port. */
  restore: () => Promise<void>;
  close: () => Promise<void>;
};

export async function startTcpProxy(databaseUrl: string): Promise<TcpProxy> {
  const target = new URL(databaseUrl);
  const sockets = new Set<net.Socket>();
  const serve = () =>
    net.createServer((client) => {
      const upstream = net.connect(Number(target.port || 5432), target.hostname);
      for (const s of [client, upstream]) {
        sockets.add(s);
        s.on('error', () => undefined);
        s.on('close', () => {
          sockets.delete(s);
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
  const listen = (server: net.Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port));
    });
  let server: net.Server | null = serve();
  const port = await listen(server, 0);
  const url = new URL(databaseUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);

  const cut = async () => {
    const closing = server;
    server = null;
    // Stop accepting first, so no connection slips in after the sweep.
    const closed = closing ? new Promise((r) => closing.close(r)) : Promise.resolve();
    for (const s of sockets) s.destroy();
    await closed;
  };
  return {
    url: url.toString(),
    cut,
    restore: async () => {
      if (server) return;
      server = serve();
      await listen(server, port);
    },
    close: cut,
  };
}
