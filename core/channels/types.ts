// One adapter per messaging channel. Everything channel-specific (settings,
// the link it hands out, how inbound requests are signed and shaped, how a
// reply is sent, how the registration is undone) lives behind this interface,
// so a fourth channel is one file plus a line in registry.ts.
import type { z } from 'zod';
import type { Config } from '../config.ts';

export const CHANNEL_STATES = ['not_linked', 'linking', 'linked', 'enabled', 'disabled', 'error'] as const;
export type ChannelState = (typeof CHANNEL_STATES)[number];

/** Opened settings of a link: public values and decrypted secrets side by side. */
export type ChannelSettings = { config: Record<string, string>; secrets: Record<string, string> };

export type InboundRequest = { headers: Record<string, string | string[] | undefined>; rawBody: Buffer; nowMs: number };

/** What an inbound request means once its signature is good. */
export type InboundParsed =
  /** Answer with this body and store nothing (Slack's URL verification). */
  | { kind: 'challenge'; body: Record<string, unknown> }
  | {
      kind: 'update';
      /** The channel's own id of the update (Telegram update_id, Slack event_id): stored once. */
      externalId: string;
      /** Where a reply goes (chat id, Slack channel, webhook conversation). */
      chatRef: string | null;
      /** The binding scope it came from (chat, workspace), compared with the bound one. */
      boundRef: string | null;
      text: string | null;
      /** A link code carried by the update (Telegram /start <code>, webhook sessionToken). */
      linkCode: string | null;
      account: Record<string, unknown> | null;
      payload: unknown;
    };

/** A send refused by the channel: retry (maybe after retryAfterS) or give up for good. */
export class ChannelSendError extends Error {
  override name = 'ChannelSendError';
  constructor(
    public readonly kind: 'retry' | 'permanent',
    message: string,
    public readonly retryAfterS: number | null = null,
  ) {
    super(message);
  }
}

export type AdapterContext = { config: Config; settings: ChannelSettings; fetch: typeof fetch };

export type ChannelAdapter = {
  id: string;
  title: string;
  /** What POST /link hands out: a URL the person opens, or a session token a client sends. */
  linkKind: 'url' | 'session_token';
  /** Body schema of POST /:channel/config (secrets optional there once stored). */
  configSchema: z.ZodObject;
  /** Names of configSchema fields that are secrets (sealed, masked, never returned). */
  secretFields: readonly string[];
  /** Fields that must be set before a link can start. */
  requiredForLink: readonly string[];
  /** The URL or token handed out for a new link code. */
  linkTarget: (config: Config, settings: ChannelSettings, code: string) => { linkUrl?: string; sessionToken?: string };
  /** Link job, first step: validate the credentials with the channel and register the inbound endpoint. */
  register: (ctx: AdapterContext, inboundUrl: string) => Promise<{ account?: Record<string, unknown> }>;
  /**
   * Link job, last step, once the binding arrived: anything still to exchange
   * (Slack's OAuth code). Returns secrets to store and the account.
   */
  finishLink?: (
    ctx: AdapterContext,
  ) => Promise<{ secrets: Record<string, string>; account: Record<string, unknown>; boundRef: string }>;
  /** True when the request is signed by the channel (constant-time, with its time window). */
  verify: (settings: ChannelSettings, request: InboundRequest) => boolean;
  parse: (body: unknown) => InboundParsed | null;
  /** Sends one reply; throws ChannelSendError. `key` identifies the reply (sent once). */
  send: (ctx: AdapterContext, to: string, text: string, key: string) => Promise<{ messageId: string | null }>;
  /** Undoes the registration at the channel (best effort, retried on 5xx). */
  unregister: (ctx: AdapterContext) => Promise<void>;
};
