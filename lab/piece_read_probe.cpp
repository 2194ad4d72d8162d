// piece_read_probe: hot random 4 KiB pieces of a file into a buffer per thread, T threads, three ways: a pread each;
// process_vm_readv of the file mapped, 1,024 pieces a call (a fault past the end of the file is an error, not a
// SIGBUS); memcpy from the mapping (the floor). M pieces/s over all threads. Not part of the build:
//   g++ -O2 -pthread -o piece_read_probe lab/piece_read_probe.cpp && ./piece_read_probe FILE THREADS PIECES_EACH

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static int fd, mode, per_thread; static char*map; static long pages; static pid_t pid;
enum {PREAD, PVR, MEMCPY};
static void* run(void* arg) {
  unsigned seed=(unsigned)(long)arg*7919+1; enum{PER=1024};
  char*buf=static_cast<char*>(aligned_alloc(4096,(size_t)PER*4096)); memset(buf,0,(size_t)PER*4096);
  struct iovec loc[PER], rem[PER];
  for(int i=0;i<per_thread;i+=PER){
    int k=per_thread-i<PER?per_thread-i:PER;
    for(int j=0;j<k;j++){ off_t o=(off_t)(rand_r(&seed)%pages)*4096;
      if(mode==PREAD){ if(pread(fd,buf+(size_t)j*4096,4096,o)!=4096){perror("pread");exit(1);} }
      else if(mode==MEMCPY) memcpy(buf+(size_t)j*4096,map+o,4096);
      else {loc[j].iov_base=buf+(size_t)j*4096;loc[j].iov_len=4096;rem[j].iov_base=map+o;rem[j].iov_len=4096;} }
    if(mode==PVR){ ssize_t r=process_vm_readv(pid,loc,k,rem,k,0); if(r!=(ssize_t)k*4096){fprintf(stderr,"process_vm_readv %zd errno %d\n",r,errno);exit(1);} }
  }
  free(buf); return NULL;
}
int main(int argc,char**argv){
  fd=open(argv[1],O_RDONLY); int threads=atoi(argv[2]); per_thread=atoi(argv[3]); pid=getpid();
  off_t size=lseek(fd,0,SEEK_END); pages=size/4096;
  map=static_cast<char*>(mmap(NULL,size,PROT_READ,MAP_SHARED,fd,0)); madvise(map,size,MADV_RANDOM);
  const char*names[]={"pread","process_vm_readv","memcpy"};
  int order[]={PREAD,PVR,PVR,MEMCPY,PREAD,PVR};
  for(int p=0;p<6;p++){ mode=order[p]; pthread_t th[256]; double t0=now();
    for(long t=0;t<threads;t++) pthread_create(&th[t],NULL,run,(void*)(t+p*1000));
    for(int t=0;t<threads;t++) pthread_join(th[t],NULL);
    double s=now()-t0; printf("%-17s %2d threads: %6.2f M pieces/s\n",names[mode],threads,threads*(double)per_thread/s/1e6); fflush(stdout); }
  return 0;
}
