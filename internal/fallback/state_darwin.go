package fallback

// darwinState maps kinfo_proc p_stat (SIDL 1, SRUN 2, SSLEEP 3, SSTOP 4,
// SZOMB 5) to the letters ps prints.
func darwinState(s int8) byte {
	switch s {
	case 1:
		return 'I'
	case 2:
		return 'R'
	case 3:
		return 'S'
	case 4:
		return 'T'
	case 5:
		return 'Z'
	}
	return 0
}
