#!/usr/bin/env bash
# Starts this machine's PostgreSQL, Redis, Mosquitto and NATS if one is not answering.
# Uses each service's own start command; does nothing for services already up.
set -u
up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
up 5432 || pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start || true
up 6379 || redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
up 1883 || mosquitto -d -c /etc/mosquitto/mosquitto.conf || true
up 4222 || start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log || true
for port in 5432 6379 1883 4222; do
  for _ in $(seq 1 50); do up "$port" && break; sleep 0.2; done
  up "$port" || echo "warning: nothing answers on 127.0.0.1:$port" >&2
done
