from benchmarks.ragtruth.run import main

raise SystemExit(main())
