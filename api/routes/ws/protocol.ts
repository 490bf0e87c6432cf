// The websocket protocol's vocabulary (described at the top of session.ts):
// what a client may send, close codes, and the limits of a connection.
import { z } from 'zod';

export const CLOSE = {
  shutdown: 1001,
  policy: 1008,
  /** Access could not be re-checked (database away): reconnect and authenticate again. */
  tryAgainLater: 1013,
  slowConsumer: 4008,
  unauthorized: 4401,
} as const;

const ClientMessageSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('auth'), token: z.string().min(1).max(8192) }),
  z.object({ type: z.literal('subscribe'), jobId: z.uuid() }),
  z.object({ type: z.literal('unsubscribe'), jobId: z.uuid() }),
  z.object({ type: z.literal('ping') }),
]);
export type ClientMessage = z.infer<typeof ClientMessageSchema>;

/** Who the socket acts for, and until when. */
export type SessionPrincipal = { userId: string; expiresAt: Date };

export const MAX_BAD_FRAMES = 20;
// setTimeout fires at once for delays past 2^31-1 ms; longer waits are re-armed.
export const MAX_TIMER_MS = 2 ** 31 - 1;
export const UNAVAILABLE = 'The database could not be reached; send this message again in a few seconds.';

/** The message, or why it was refused. */
export function parseClientMessage(data: unknown, isBinary: boolean): ClientMessage | string {
  if (isBinary) return 'binary frames are not accepted; send JSON text';
  let json: unknown;
  try {
    json = JSON.parse(String(data));
  } catch {
    return 'not valid JSON';
  }
  const result = ClientMessageSchema.safeParse(json);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  return `${issue?.path.join('.') || 'message'}: ${issue?.message ?? 'invalid'}`;
}
