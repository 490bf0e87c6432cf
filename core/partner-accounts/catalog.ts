// The services a connected partner account can open to the tenant's agents:
// defined once here, read by the connect flow (which scopes to ask for), the
// OpenAPI schema (the service ids) and the account view (scopes per service).
// Scope names use the neutral prefix `svc.`; register them at the provider.

export const CATEGORIES = ['Core', 'Communication', 'Location', 'Specialized'] as const;
export type Category = (typeof CATEGORIES)[number];

export type Service = { id: string; name: string; category: Category; description: string; scopes: readonly string[] };

const read = (id: string) => [`svc.${id}.read`];
const readWrite = (id: string) => [`svc.${id}.read`, `svc.${id}.write`];

export const SERVICES = [
  {
    id: 'calendar',
    name: 'Calendar',
    category: 'Core',
    description: 'Read events and free/busy time; create and update events.',
    scopes: readWrite('calendar'),
  },
  {
    id: 'mail',
    name: 'Mail',
    category: 'Core',
    description: "Read, search and draft e-mail; send on the person's behalf.",
    scopes: readWrite('mail'),
  },
  {
    id: 'contacts',
    name: 'Contacts',
    category: 'Core',
    description: "Look up and update the person's contacts.",
    scopes: readWrite('contacts'),
  },
  {
    id: 'drive',
    name: 'Drive',
    category: 'Core',
    description: 'List, read and upload files in cloud storage.',
    scopes: readWrite('drive'),
  },
  {
    id: 'documents',
    name: 'Documents',
    category: 'Core',
    description: 'Read and edit text documents.',
    scopes: readWrite('documents'),
  },
  {
    id: 'spreadsheets',
    name: 'Spreadsheets',
    category: 'Core',
    description: 'Read and edit spreadsheets.',
    scopes: readWrite('spreadsheets'),
  },
  {
    id: 'tasks',
    name: 'Tasks',
    category: 'Core',
    description: 'Read and manage task lists.',
    scopes: readWrite('tasks'),
  },
  { id: 'notes', name: 'Notes', category: 'Core', description: 'Read and write notes.', scopes: readWrite('notes') },
  {
    id: 'chat',
    name: 'Chat',
    category: 'Communication',
    description: 'Read conversations and post messages in team chat.',
    scopes: readWrite('chat'),
  },
  {
    id: 'meetings',
    name: 'Meetings',
    category: 'Communication',
    description: 'Schedule video meetings and read their transcripts.',
    scopes: readWrite('meetings'),
  },
  {
    id: 'phone',
    name: 'Phone',
    category: 'Communication',
    description: 'Read call history and voicemail.',
    scopes: read('phone'),
  },
  {
    id: 'sms',
    name: 'Text messages',
    category: 'Communication',
    description: 'Read and send text messages.',
    scopes: readWrite('sms'),
  },
  {
    id: 'video',
    name: 'Video',
    category: 'Communication',
    description: "List and upload videos on the person's channel.",
    scopes: readWrite('video'),
  },
  {
    id: 'groups',
    name: 'Groups',
    category: 'Communication',
    description: 'Read mailing lists and group discussions.',
    scopes: read('groups'),
  },
  {
    id: 'maps',
    name: 'Maps',
    category: 'Location',
    description: "Read saved places and lists on the person's maps.",
    scopes: read('maps'),
  },
  {
    id: 'places',
    name: 'Places',
    category: 'Location',
    description: 'Search places and their opening hours.',
    scopes: read('places'),
  },
  {
    id: 'directions',
    name: 'Directions',
    category: 'Location',
    description: 'Plan routes and travel times.',
    scopes: read('directions'),
  },
  {
    id: 'timeline',
    name: 'Timeline',
    category: 'Location',
    description: "Read the person's location history.",
    scopes: read('timeline'),
  },
  {
    id: 'geocoding',
    name: 'Geocoding',
    category: 'Location',
    description: 'Turn addresses into coordinates and back.',
    scopes: read('geocoding'),
  },
  {
    id: 'photos',
    name: 'Photos',
    category: 'Specialized',
    description: 'Read albums and upload photos.',
    scopes: readWrite('photos'),
  },
  {
    id: 'fitness',
    name: 'Fitness',
    category: 'Specialized',
    description: 'Read activity and health measurements.',
    scopes: read('fitness'),
  },
  {
    id: 'books',
    name: 'Books',
    category: 'Specialized',
    description: "Read the person's library and reading lists.",
    scopes: read('books'),
  },
  {
    id: 'translation',
    name: 'Translation',
    category: 'Specialized',
    description: "Translate text with the person's glossaries.",
    scopes: read('translation'),
  },
  {
    id: 'analytics',
    name: 'Analytics',
    category: 'Specialized',
    description: "Read reports of the person's web properties.",
    scopes: read('analytics'),
  },
  {
    id: 'payments',
    name: 'Payments',
    category: 'Specialized',
    description: 'Read payment history and receipts.',
    scopes: read('payments'),
  },
] as const satisfies readonly Service[];

export type ServiceId = (typeof SERVICES)[number]['id'];
export const SERVICE_IDS = SERVICES.map((s) => s.id) as [ServiceId, ...ServiceId[]];

const byId = new Map<string, Service>(SERVICES.map((s) => [s.id, s]));
export const serviceById = (id: string): Service | undefined => byId.get(id);

/** Every scope of the catalog (what the provider must know). */
export const ALL_SCOPES: readonly string[] = SERVICES.flatMap((s) => s.scopes);

/** Always asked for: the person's identity (openid, email: shown in the account list) and a refresh token (offline_access). */
export const BASE_SCOPES = ['openid', 'email', 'offline_access'] as const;

/** The scope string for these services plus the scopes already granted. */
export function scopeFor(services: readonly string[], alreadyGranted: readonly string[] = []): string {
  const scopes = new Set<string>([...BASE_SCOPES, ...alreadyGranted]);
  for (const id of services) for (const scope of serviceById(id)?.scopes ?? []) scopes.add(scope);
  return [...scopes].join(' ');
}

/** Per service: the scopes of it that were granted; services with none granted are left out. */
export function grantedPerService(
  services: readonly string[],
  granted: ReadonlySet<string>,
): { serviceId: string; scopes: string[] }[] {
  return services
    .map((id) => ({ serviceId: id, scopes: (serviceById(id)?.scopes ?? []).filter((s) => granted.has(s)) }))
    .filter((s) => s.scopes.length > 0);
}

export function catalogByCategory() {
  return CATEGORIES.map((category) => ({
    category,
    services: SERVICES.filter((s) => s.category === category).map((s) => ({
      id: s.id,
      name: s.name,
      description: s.description,
      scopes: [...s.scopes],
    })),
  }));
}
