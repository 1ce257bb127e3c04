#!/bin/sh
# Entry point of the compose `mosquitto` service (eclipse-mosquitto:2.0 image).
#
# On first start, creates the dynamic-security file with the admin client from
# MQTT_ADMIN_USERNAME / MQTT_ADMIN_PASSWORD (deploy/compose.env). `dynsec init` gives that
# client the `admin` role, which may use $CONTROL/dynamic-security/# (and read $SYS/#) but
# not publish to ordinary topics. The file lives on the data volume: later starts keep it,
# with every client and role created since, and never reset the admin password.
# Changing MQTT_ADMIN_PASSWORD afterwards needs `mosquitto_ctrl ... dynsec setClientPassword`
# (or removing the volume, which also forgets every device credential).
set -eu

DYNSEC_FILE=/mosquitto/data/dynamic-security.json

if [ ! -s "$DYNSEC_FILE" ]; then
  : "${MQTT_ADMIN_USERNAME:?MQTT_ADMIN_USERNAME must be set (deploy/compose.env)}"
  : "${MQTT_ADMIN_PASSWORD:?MQTT_ADMIN_PASSWORD must be set (deploy/compose.env)}"
  rm -f "$DYNSEC_FILE"
  mosquitto_ctrl dynsec init "$DYNSEC_FILE" "$MQTT_ADMIN_USERNAME" "$MQTT_ADMIN_PASSWORD" >/dev/null
  echo "entrypoint: created $DYNSEC_FILE with admin client '$MQTT_ADMIN_USERNAME'"
fi

# Mosquitto starts as root and drops to the mosquitto user: the plugin rewrites its file on
# every change, so the data directory (and the file in it) must belong to that user. The
# config is a read-only mount and needs no change, unlike the stock entry point assumes.
chown -R mosquitto:mosquitto /mosquitto/data
chmod 600 "$DYNSEC_FILE"

exec "$@"
