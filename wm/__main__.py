from wm.cli import main

main()
