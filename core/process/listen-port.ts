// The api's port is settled before anything else starts: a busy port stops
// the process before a worker takes jobs or the database is touched, and
// PORT=0 becomes the real port in every URL the service generates (BASE_URL,
// AUTH_URL, llms.txt, auth.md, Arazzo, billing return pages).
import { createServer } from 'node:net';
import { loadConfig, type Config } from '../config.ts';

export class ListenPortError extends Error {
  override name = 'ListenPortError';
}

/** Binds host:port once to see that it can be had (and which port 0 picks), then frees it for the api. */
async function probePort(host: string, port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', (error: NodeJS.ErrnoException) => {
      if (error.code === 'EADDRINUSE') {
        reject(
          new ListenPortError(
            `port ${port} on ${host} is already in use; stop what holds it, or set PORT to another port (PORT=0 picks a free one)`,
          ),
        );
      } else if (error.code === 'EACCES') {
        reject(new ListenPortError(`port ${port} on ${host} needs privileges; set PORT to 1024 or above`));
      } else if (error.code === 'EADDRNOTAVAIL' || error.code === 'ENOTFOUND') {
        reject(
          new ListenPortError(
            `HOST ${host} is not an address of this machine; set HOST (127.0.0.1, or 0.0.0.0 for every interface)`,
          ),
        );
      } else {
        reject(error);
      }
    });
    server.listen({ host, port, exclusive: true }, () => {
      const address = server.address();
      const bound = typeof address === 'object' && address ? address.port : port;
      server.close(() => resolve(bound));
    });
  });
}

/**
 * The config with the port the api will listen on. With PORT=0 the free port
 * is chosen here and the config is read again with it, so the URLs derived
 * from the port name the real one.
 */
export async function settleListenPort(config: Config, env: NodeJS.ProcessEnv = process.env): Promise<Config> {
  const port = await probePort(config.host, config.port);
  if (port === config.port) return config;
  return loadConfig({ ...env, PORT: String(port) });
}
