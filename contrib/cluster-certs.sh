#!/usr/bin/env bash
# cluster-certs.sh: a certificate authority for a Shard cluster and one
# certificate and key per node, for the TLS of the routes between nodes
# (cluster.tls_cert, cluster.tls_key, cluster.tls_ca; docs/deployment.md,
# "A three-machine cluster").
#
#   contrib/cluster-certs.sh [--force] [--out DIR] [--days N] NODE=ADDR[,ADDR...]...
#
#   contrib/cluster-certs.sh --out shard-certs a=a.lan,10.0.0.11 b=b.lan,10.0.0.12 c=c.lan,10.0.0.13
#
# NODE is the node's cluster.node name (letters, digits, '-' and '_'); each
# ADDR is an IP address or a host name the other nodes reach it by (the
# host of its route URLs). Every one becomes a subject alternative name of
# the node's certificate.
#
# Routes verify both ends against the CA: each node is a TLS server for
# the routes it accepts and a TLS client for the routes it dials, so every
# node certificate carries both extended key usages, serverAuth and
# clientAuth. Keys are ECDSA P-256.
#
# Files (all owner-only, 0600, in DIR, default ./shard-certs):
#   ca.crt            the CA certificate: goes to every node
#   ca.key            the CA key: keep it off the nodes, offline
#   NODE.crt NODE.key the node's certificate and key: go to that node only
#
# An existing CA in DIR is reused (that is how a node is added later). An
# existing node certificate is never overwritten without --force; without
# it the script changes nothing and exits 1. To start over with a new CA,
# remove DIR.
set -euo pipefail

usage() {
  sed -n '7,8p' "$0" | sed 's/^# *//' >&2
  exit 2
}

out=shard-certs
days=825
force=0
nodes=()
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --out) [ $# -ge 2 ] || usage; out="$2"; shift ;;
    --out=*) out="${1#--out=}" ;;
    --days) [ $# -ge 2 ] || usage; days="$2"; shift ;;
    --days=*) days="${1#--days=}" ;;
    -h|--help) usage ;;
    -*) echo "cluster-certs: unknown option $1" >&2; usage ;;
    *) nodes+=("$1") ;;
  esac
  shift
done
[ ${#nodes[@]} -gt 0 ] || usage
case "$days" in ''|*[!0-9]*) echo "cluster-certs: --days $days: want a number of days" >&2; exit 2 ;; esac
command -v openssl >/dev/null 2>&1 || { echo "cluster-certs: openssl is missing (Debian: apt-get install openssl)" >&2; exit 1; }

# Check every argument before making anything.
names=() sans=()
for arg in "${nodes[@]}"; do
  name="${arg%%=*}" addrs="${arg#*=}"
  if [ "$name" = "$arg" ] || [ -z "$addrs" ]; then
    echo "cluster-certs: $arg: want NODE=ADDR[,ADDR...]" >&2; exit 2
  fi
  case "$name" in ''|*[!A-Za-z0-9_-]*) echo "cluster-certs: node name $name: letters, digits, '-' and '_' only" >&2; exit 2 ;; esac
  for n in "${names[@]+"${names[@]}"}"; do
    [ "$n" != "$name" ] || { echo "cluster-certs: node $name given twice" >&2; exit 2; }
  done
  san=""
  IFS=, read -r -a list <<<"$addrs"
  for a in "${list[@]}"; do
    [ -n "$a" ] || continue
    if [[ "$a" =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || [[ "$a" == *:* ]]; then
      san="$san,IP:$a"
    elif [[ "$a" =~ ^[A-Za-z0-9.-]+$ ]]; then
      san="$san,DNS:$a"
    else
      echo "cluster-certs: $a: not an IP address or a host name" >&2; exit 2
    fi
  done
  [ -n "$san" ] || { echo "cluster-certs: $arg: no address" >&2; exit 2; }
  names+=("$name") sans+=("${san#,}")
done

umask 077
mkdir -p "$out"
chmod 700 "$out"

if [ "$force" = 0 ]; then
  exist=""
  for name in "${names[@]}"; do
    for f in "$out/$name.crt" "$out/$name.key"; do
      [ ! -e "$f" ] || exist="$exist $f"
    done
  done
  if [ -n "$exist" ]; then
    echo "cluster-certs: already there:$exist; nothing changed (--force reissues them)" >&2
    exit 1
  fi
fi

if [ -e "$out/ca.crt" ] || [ -e "$out/ca.key" ]; then
  [ -s "$out/ca.crt" ] && [ -s "$out/ca.key" ] || { echo "cluster-certs: $out has half a CA (ca.crt or ca.key missing)" >&2; exit 1; }
  echo "reusing the CA in $out/ca.crt"
else
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$out/ca.key" -out "$out/ca.crt" -days "$days" -subj "/CN=Shard cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE,pathlen:0" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  echo "made the CA: $out/ca.crt (its key $out/ca.key stays off the nodes)"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
for i in "${!names[@]}"; do
  name="${names[$i]}" san="${sans[$i]}"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -keyout "$tmp/$name.key" -out "$tmp/$name.csr" -subj "/CN=$name" 2>/dev/null
  cat >"$tmp/$name.ext" <<EOF
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san
EOF
  openssl x509 -req -in "$tmp/$name.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days "$days" -extfile "$tmp/$name.ext" \
    -out "$tmp/$name.crt" 2>/dev/null
  openssl verify -CAfile "$out/ca.crt" -purpose sslserver "$tmp/$name.crt" >/dev/null
  openssl verify -CAfile "$out/ca.crt" -purpose sslclient "$tmp/$name.crt" >/dev/null
  mv -f "$tmp/$name.key" "$out/$name.key"
  mv -f "$tmp/$name.crt" "$out/$name.crt"
  echo "made $out/$name.crt and $out/$name.key for node $name (${san//,/, })"
done

echo
echo "Copy to each node, owned by the user shardd runs as, mode 0600:"
for name in "${names[@]}"; do
  echo "  node $name: $out/ca.crt $out/$name.crt $out/$name.key -> /etc/shard/cluster/"
done
echo "and set in its /etc/shard/cluster.env:"
echo "  SHARD_CLUSTER_TLS_CA=/etc/shard/cluster/ca.crt"
echo "  SHARD_CLUSTER_TLS_CERT=/etc/shard/cluster/<node>.crt"
echo "  SHARD_CLUSTER_TLS_KEY=/etc/shard/cluster/<node>.key"
echo "Keep $out/ca.key off the nodes."
