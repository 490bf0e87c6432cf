// The Stripe SDK's module, loaded at its first use: its ~200 modules cost
// every process ~0.15 s of CPU at start, and most never call Stripe.
import type Stripe from 'stripe';
import { lazyRequire } from '../lazy-require.ts';

export const stripeSdk = lazyRequire<typeof Stripe>('stripe');
