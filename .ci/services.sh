#!/usr/bin/env bash
# Make sure PostgreSQL, MariaDB, Redis (127.0.0.1:6379) and a local 3-master Redis Cluster (7001-7003) answer
# with the settings the tests expect: start them if they are installed but stopped, install them from Debian's
# packages if absent.
# Also install promtool (for ops/*.yml) when it is missing.
set -euo pipefail

have_pg() { pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; }
have_mysql() { mysqladmin ping -h 127.0.0.1 -P 3306 -uroot --silent >/dev/null 2>&1; }
have_redis() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = PONG ]; }

wait_for() {
  local what=$1 check=$2
  for _ in $(seq 1 60); do
    if $check; then return 0; fi
    sleep 1
  done
  echo "services: $what did not come up" >&2
  return 1
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "$@" >/dev/null
}

if ! have_pg; then
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    echo "services: installing PostgreSQL"
    apt_install postgresql
  fi
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  if ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_for PostgreSQL have_pg
fi
for db in test root; do
  psql -h 127.0.0.1 -U postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1 ||
    psql -h 127.0.0.1 -U postgres -qc "CREATE DATABASE $db"
done

if ! have_mysql; then
  if [ ! -x /usr/sbin/mariadbd ]; then
    echo "services: installing MariaDB"
    apt_install mariadb-server
  fi
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd || /etc/init.d/mariadb start
  # A fresh install lets root in only over the socket; the tests log in over TCP with an empty password.
  for _ in $(seq 1 60); do mysqladmin ping --silent >/dev/null 2>&1 && break; sleep 1; done
  mysql -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD(''); FLUSH PRIVILEGES;" 2>/dev/null || true
  wait_for MariaDB have_mysql
fi
mysql -h 127.0.0.1 -uroot -e 'CREATE DATABASE IF NOT EXISTS test'

if ! have_redis; then
  if ! command -v redis-server >/dev/null; then
    echo "services: installing Redis"
    apt_install redis-server
  fi
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no
  wait_for Redis have_redis
fi
bash scripts/redis-cluster.sh
echo "services: PostgreSQL, MariaDB, Redis and the Redis Cluster are up"

# promtool checks the alert rules in ops/ (Debian's prometheus package ships it; its server is not needed).
if ! command -v promtool >/dev/null 2>&1; then
  echo "services: installing promtool"
  apt_install --no-install-recommends prometheus
fi
