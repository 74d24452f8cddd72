#!/usr/bin/env bash
# Start the local services the test suite needs, if they are not already up.
# Each argument names a service; with none, nothing is started (the memory and
# SQLite drivers need no server). Used by .ci/run and by developers alike.
set -euo pipefail

up() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() {
  local name=$1 port=$2
  for _ in $(seq 1 60); do up "$port" && return 0; sleep 1; done
  echo "services.sh: $name did not come up on 127.0.0.1:$port" >&2
  return 1
}

for service in "$@"; do
  case "$service" in
    postgres)
      up 5432 || pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
      wait_for postgres 5432 ;;
    mariadb|mysql)
      up 3306 || start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
      wait_for mariadb 3306 ;;
    redis)
      up 6379 || redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
        --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
      wait_for redis 6379 ;;
    rabbitmq)
      up 5672 || rabbitmq-server -detached
      wait_for rabbitmq 5672 ;;
    nats)
      up 4222 || start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server \
        -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
      wait_for nats 4222 ;;
    *) echo "services.sh: unknown service $service" >&2; exit 2 ;;
  esac
done
