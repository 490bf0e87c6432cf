// The configuration files of the HA harness (ops/ha/cluster.ts): a Patroni
// member's YAML and HAProxy's. The choices that make the promise:
// - synchronous_mode: a commit is acknowledged only once a standby has it,
//   and only that standby may be promoted, so a failover loses nothing the
//   platform was told was written;
// - ttl 10 s / loop_wait 1 s: a lost primary's leader key expires within 10 s;
// - primary_stop_timeout 5 s: at a switchover the old primary's fast
//   shutdown under load can wait ~19 s for its backends; in synchronous mode
//   Patroni may cut it short (SIGKILL) without losing an acknowledged commit;
// - HAProxy checks each member's /primary every 500 ms and cuts the sessions
//   of a member that stops being it (on-marked-down shutdown-sessions), so no
//   connection lingers on a demoted, read-only server.

export type Member = { name: string; pgPort: number; restPort: number; dataDir: string };

export function patroniConfig(
  m: Member,
  o: { dir: string; binDir: string; etcdPort: number; synchronous: boolean },
): string {
  return `scope: platform-ha
name: ${m.name}
log:
  level: WARNING
restapi:
  listen: 127.0.0.1:${m.restPort}
  connect_address: 127.0.0.1:${m.restPort}
etcd3:
  hosts: 127.0.0.1:${o.etcdPort}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    synchronous_mode: ${o.synchronous}
    primary_stop_timeout: 5
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        max_connections: 300
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
        synchronous_commit: "on"
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
  pg_hba:
    - local all all trust
    - host replication replicator 127.0.0.1/32 md5
    - host all all 127.0.0.1/32 md5
postgresql:
  listen: 127.0.0.1:${m.pgPort}
  connect_address: 127.0.0.1:${m.pgPort}
  data_dir: ${m.dataDir}
  bin_dir: ${o.binDir}
  pgpass: ${o.dir}/${m.name}.pgpass
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
    rewind:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: ${o.dir}
    shared_buffers: 64MB
    fsync: "on"
`;
}

export function haproxyConfig(port: number, members: Member[], statsSocket: string): string {
  return `global
  maxconn 2000
  stats socket ${statsSocket} mode 600 level admin
defaults
  mode tcp
  timeout connect 2s
  timeout client 30m
  timeout server 30m
  timeout check 1s
listen postgres-primary
  bind 127.0.0.1:${port}
  option httpchk OPTIONS /primary
  http-check expect status 200
  default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
${members.map((m) => `  server ${m.name} 127.0.0.1:${m.pgPort} maxconn 500 check port ${m.restPort}`).join('\n')}
`;
}
