# Sourced by the scripts here, first thing after their header comment:
#   source "$(dirname "$0")/help.sh"; help_if_asked "$0" "${1:-}"
# prints the script's header comment (its second line to the first that is not a comment) and
# exits 0 when the first argument is -h or --help, so no script takes --help for a folder or a
# count.
help_if_asked() {
  case "${2:-}" in
    -h | --help)
      awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$1"
      exit 0
      ;;
  esac
}
