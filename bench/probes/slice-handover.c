// Probe (bench/profile-throughput.md, round 17): read, check and slice a pcap on one thread, or on two (a helper
// takes every other 256 KiB run and hands its records over sliced, 48 bytes each, through a ring of four slots).
//   gcc -O2 -pthread -o slice-handover bench/probes/slice-handover.c && ./slice-handover FILE.pcap 0|1
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
typedef struct { uint64_t ts; uint32_t len, caplen; uint64_t src, dst; uint32_t sp, dp; uint64_t pad; } Sl; // 48 B
#define RUN (256<<10)
int fd; off_t n; long nruns;
// Runs are byte ranges; records straddle runs, so slicing needs the record boundaries: precompute run starts at
// record boundaries with a first pass over headers (the index gives these in the real thing).
off_t *starts;
static uint64_t check(const unsigned char*b, size_t k){ uint64_t s=0; for(size_t i=0;i+8<=k;i+=8){ uint64_t x; memcpy(&x,b+i,8); s=s*31+x; } return s; }
static size_t slice(const unsigned char*b, size_t k, Sl*out){ size_t o=0,m=0; while(o+16<=k){ uint32_t incl,orig,tsec,tus; memcpy(&tsec,b+o,4); memcpy(&tus,b+o+4,4); memcpy(&incl,b+o+8,4); memcpy(&orig,b+o+12,4); const unsigned char*f=b+o+16; Sl s; s.ts=tsec*1000000000ull+tus*1000ull; s.len=orig; s.caplen=incl; uint32_t a,d; memcpy(&a,f+26,4); memcpy(&d,f+30,4); s.src=a; s.dst=d; uint16_t sp,dp; memcpy(&sp,f+34,2); memcpy(&dp,f+36,2); s.sp=sp; s.dp=dp; s.pad=f[23]; out[m++]=s; o+=16+incl; } return m; }
typedef struct { Sl *v; size_t m; atomic_int full; uint64_t ck; } Slot;
#define NS 4
Slot slots[NS];
void* helper(void*a){ unsigned char*buf=aligned_alloc(4096,RUN*2); for(long r=1;r<nruns;r+=2){ Slot*s=&slots[(r/2)%NS]; while(atomic_load_explicit(&s->full,memory_order_acquire)) ; size_t k=starts[r+1]-starts[r]; pread(fd,buf,k,starts[r]); s->ck=check(buf,k); s->m=slice(buf,k,s->v); atomic_store_explicit(&s->full,1,memory_order_release);} return 0; }
uint64_t consume(Sl*v,size_t m){ uint64_t x=0; for(size_t i=0;i<m;i++) x+=v[i].src^v[i].dst^v[i].sp^v[i].len; return x; }
int main(int c,char**v){ fd=open(v[1],O_RDONLY); n=lseek(fd,0,SEEK_END); int two=atoi(v[2]);
  // run starts at record boundaries (a pre-pass; the index has them)
  unsigned char*all=malloc(n); pread(fd,all,n,0); starts=malloc(sizeof(off_t)*(n/RUN*2+16)); long r=0; off_t o=24, last=24; starts[r++]=24;
  while(o+16<=n){ uint32_t incl; memcpy(&incl,all+o+8,4); if(o+16+incl>n) break; if(o+16+incl-last>RUN){ starts[r++]=o; last=o;} o+=16+incl; } starts[r]=o; nruns=r; free(all);
  for(int i=0;i<NS;i++){ slots[i].v=malloc(sizeof(Sl)*RUN/16); atomic_store(&slots[i].full,0);} Sl*mine=malloc(sizeof(Sl)*RUN/16); unsigned char*buf=aligned_alloc(4096,RUN*2);
  double t0=now(); uint64_t x=0; pthread_t th; if(two) pthread_create(&th,0,helper,0);
  for(long i=0;i<nruns;i++){ if(two && (i&1)){ Slot*s=&slots[(i/2)%NS]; while(!atomic_load_explicit(&s->full,memory_order_acquire)) ; x+=consume(s->v,s->m)+s->ck; atomic_store_explicit(&s->full,0,memory_order_release);} else { size_t k=starts[i+1]-starts[i]; pread(fd,buf,k,starts[i]); x+=check(buf,k); size_t m=slice(buf,k,mine); x+=consume(mine,m);} }
  if(two) pthread_join(th,0);
  printf("%s: %.3f s (runs %ld, x %lu)\n", two?"two threads":"one thread", now()-t0, nruns, x);
}
