# Sourced by the bench scripts. minmed FILE WIDTH: FILE holds lines "name value", one per
# round; prints each name with the minimum and the median of its values and every value, in
# the order the rounds ran.
minmed() {
	awk '{v[$1] = v[$1] " " $2} END {for (k in v) print k, v[k]}' "$1" | sort | while read -r name vals; do
		sorted=$(echo "$vals" | tr ' ' '\n' | sort -g | tr '\n' ' ')
		n=$(echo "$sorted" | wc -w)
		min=$(echo "$sorted" | cut -d' ' -f1)
		med=$(echo "$sorted" | cut -d' ' -f$(((n + 1) / 2)))
		printf "%-${2}s %8s / %8s   (%s)\n" "$name" "$min" "$med" "$vals"
	done
}
