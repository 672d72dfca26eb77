# shellcheck shell=bash
# Sourced by bench/in-guest and bench/daemon-soak, which set CONFINE.
# start_daemon DIR USER [DAEMON-ARGS...]: starts `confine daemon` on
# DIR/confine.sock for USER's group, under a ceiling that lets a job read
# everything and write its own directories, and sets DAEMON_PID. Fails,
# with the daemon's log, if it never listens.
start_daemon() {
	local dir=$1 user=$2
	shift 2
	mkdir -p "$dir"
	printf 'version = 1\n[filesystem]\nread = ["/"]\nwrite = ["{workdir}", "{home}", "{tmp}"]\ndeny = ["{user_home}"]\n' \
		>"$dir/ceiling.toml"
	"$CONFINE" daemon --socket "$dir/confine.sock" --ceiling "$dir/ceiling.toml" --group "$user" "$@" \
		2>"$dir/daemon.log" &
	# shellcheck disable=SC2034 # for the scripts that source this
	DAEMON_PID=$!
	for _ in $(seq 600); do [[ -S $dir/confine.sock ]] && return 0; sleep 0.1; done
	echo "the daemon never listened on $dir/confine.sock: $(cat "$dir/daemon.log")" >&2
	return 1
}
