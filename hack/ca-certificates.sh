#!/usr/bin/env bash
# Prints the path of the CA bundle that the operator image carries at the same path, so that backups
# to https:// S3 endpoints verify certificates of public CAs: Debian's ca-certificates bundle,
# /etc/ssl/certs/ca-certificates.crt. Installs the package first when the bundle is missing (a fresh
# machine), and fails when it still holds no certificate.
set -euo pipefail
BUNDLE=/etc/ssl/certs/ca-certificates.crt
if ! grep -qs -- '-----BEGIN CERTIFICATE-----' "$BUNDLE"; then
  if ! dpkg-query -W -f='${Status}' ca-certificates 2>/dev/null | grep -q 'install ok installed'; then
    echo "installing Debian's ca-certificates (the CA bundle of the operator image)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ca-certificates >&2
  fi
  # installed, but the bundle was removed or never generated
  grep -qs -- '-----BEGIN CERTIFICATE-----' "$BUNDLE" || update-ca-certificates >&2
fi
grep -qs -- '-----BEGIN CERTIFICATE-----' "$BUNDLE" || { echo "$BUNDLE holds no certificate, even after installing ca-certificates" >&2; exit 1; }
echo "$BUNDLE"
